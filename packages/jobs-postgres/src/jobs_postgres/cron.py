"""The :class:`jobs_core.schedules.Cron` port on cronsim.

Why cronsim (decision 0018): it is maintained (releases through 2026), small, pure Python with no
dependency, typed, and it evaluates expressions across daylight-saving changes the way Debian's
cron does, which is the behaviour an operator expects: a job at a fixed local time runs once on
the day the clock skips it (at the first instant after the gap) and once on the day it repeats;
a job every N minutes keeps running by elapsed time through both. croniter (also maintained
again, 7.x) was the other candidate; its DST handling has a long history of bug reports and it
carries more surface (hashed expressions, ranges) than schedules need.

Expressions have 5 fields (minute hour day month weekday) or 6 with the seconds first
(``*/5 * * * * *``: every 5 seconds).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from jobs_core.schedules import ScheduleInvalid


@lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleInvalid(
            f"unknown time zone {name!r}: use an IANA name such as 'UTC' or 'Europe/Paris'"
        ) from None


class CronsimCron:
    """Cron expressions read by cronsim, in IANA time zones (``zoneinfo``)."""

    def check(self, expression: str, timezone: str) -> None:
        """Raise :class:`ScheduleInvalid` for a bad expression or an unknown zone."""
        zone = _zone(timezone)
        try:
            CronSim(expression, datetime.now(zone))
        except CronSimError as error:
            raise ScheduleInvalid(
                f"invalid cron expression {expression!r}: {error} (5 fields: minute hour day "
                "month weekday, or 6 with the seconds first)"
            ) from None

    def next_after(self, expression: str, timezone: str, after: datetime) -> datetime:
        """The first tick strictly after ``after``, in UTC."""
        local = after.astimezone(_zone(timezone))
        try:
            tick: datetime = next(CronSim(expression, local))
        except CronSimError as error:
            raise ScheduleInvalid(f"invalid cron expression {expression!r}: {error}") from None
        except StopIteration:  # pragma: no cover - e.g. '0 0 30 2 *' never fires
            raise ScheduleInvalid(f"cron expression {expression!r} never fires") from None
        return tick.astimezone(UTC)
