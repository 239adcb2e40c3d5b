"""Structured log lines: ``event=job.finished job_id=… type=… org=…`` as text, or JSON.

A line is built lazily: :class:`Event` holds the fields and renders only if a handler formats
it, so a filtered-out level costs almost nothing on the hot path of a fast drain. The ends of a
batch of jobs are one record (:class:`Events`, :func:`log_events`) that the worker's formatters
write as one line per job: a record per job (its ``LogRecord``, its time stamp, its handler
call) was a sixth of the completer's time in a fast drain.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

_SAFE = re.compile(r"[a-zA-Z0-9\-_.:/@+]+")
"""A value made only of these characters is written bare; any other is quoted (JSON)."""


class Event:
    """A log message made of an event name and key/value fields."""

    __slots__ = ("fields", "name")

    def __init__(self, name: str, fields: Mapping[str, Any]) -> None:
        self.name = name
        self.fields = fields

    def __str__(self) -> str:
        parts = [f"event={self.name}"]
        parts.extend(f"{key}={_text(value)}" for key, value in self.fields.items())
        return " ".join(parts)


class Events:
    """Several :class:`Event` of one level in one record: one line each when formatted."""

    __slots__ = ("events",)

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def __str__(self) -> str:
        return "\n".join(str(event) for event in self.events)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    text = str(value)
    # A regular expression, not a loop over the characters: two lines per job are rendered on
    # the worker's hot threads (bench/NOTES.md §3).
    if _SAFE.fullmatch(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def log_event(
    logger: logging.Logger, level: int, name: str, *, exc_info: bool = False, **fields: Any
) -> None:
    """Log one structured line (nothing is rendered if ``level`` is disabled)."""
    if logger.isEnabledFor(level):
        logger.log(level, Event(name, fields), exc_info=exc_info)


def log_events(
    logger: logging.Logger, level: int, events: list[tuple[str, dict[str, Any]]]
) -> None:
    """Log ``events`` (name, fields) as one record of :class:`Events` (nothing is built if
    ``level`` is disabled)."""
    if events and logger.isEnabledFor(level):
        logger.log(level, Events([Event(name, fields) for name, fields in events]))


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger> event=… key=value …``, one line per event of an :class:`Events`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record``: one line, or one per event of a batch."""
        if not isinstance(record.msg, Events) or record.exc_info:
            return super().format(record)
        prefix = f"{self.formatTime(record)} {record.levelname} {record.name} "
        return "\n".join(prefix + str(event) for event in record.msg.events)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, then the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as a JSON line (one per event of an :class:`Events`)."""
        if isinstance(record.msg, Events):
            return "\n".join(
                self._document(record, event.name, event.fields) for event in record.msg.events
            )
        document: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        if isinstance(record.msg, Event):
            document["event"] = record.msg.name
            document.update(record.msg.fields)
        else:
            document["message"] = record.getMessage()
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str, ensure_ascii=False)

    def _document(self, record: logging.LogRecord, name: str, fields: Mapping[str, Any]) -> str:
        document: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": name,
        }
        document.update(fields)
        return json.dumps(document, default=str, ensure_ascii=False)


def configure_logging(level: str, style: Literal["text", "json"]) -> None:
    """Send the process's logs to stderr, one line each (the deployable's choice, not a
    library's: only the worker's entry point calls this)."""
    handler = logging.StreamHandler(sys.stderr)
    if style == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
