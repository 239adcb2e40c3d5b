"""The frames ``GET /jobs/events`` writes (docs/events.md): each event encoded once, as bytes."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from jobs_core import Status
from jobs_core.events import JobEvent, Position

from jobs_api.event_ids import EventIds
from jobs_api.schemas import JobOut


@dataclass(frozen=True, slots=True)
class Encoded:
    """An event as every subscriber of its org sends it (encoded once)."""

    position: Position
    org_id: str
    job_id: uuid.UUID
    type: str
    status: Status
    frame: bytes


def encode_event(event: JobEvent, ids: EventIds) -> Encoded:
    """The ``job`` frame of an event: ``id:``, ``event: job``, one ``data:`` line of JSON."""
    job = event.job
    data = (
        f'{{"kind":"{event.kind.value}","at":{json.dumps(event.at.isoformat())},'
        f'"job":{JobOut.of(job).model_dump_json()}}}'
    )
    frame = f"id: {ids.encode(event.position)}\nevent: job\ndata: {data}\n\n".encode()
    return Encoded(event.position, job.org_id, job.id, job.type, job.status, frame)


def control_frame(name: str, event_id: str, **data: object) -> bytes:
    """A ``ready`` or ``resync`` frame."""
    body = json.dumps({**data, "at": datetime.now(UTC).isoformat()})
    return f"id: {event_id}\nevent: {name}\ndata: {body}\n\n".encode()


KEEPALIVE = b": keep-alive\n\n"


def store_frame(reachable: bool, since: datetime | None) -> bytes:
    """A ``store`` frame: whether the hub can read the job store, and since when it cannot.

    It carries no ``id:`` (a client's last event id stays the last change it was given), so a
    client resuming after it misses nothing.
    """
    body = json.dumps(
        {
            "reachable": reachable,
            "since": None if since is None else since.isoformat(),
            "at": datetime.now(UTC).isoformat(),
        }
    )
    return f"event: store\ndata: {body}\n\n".encode()
