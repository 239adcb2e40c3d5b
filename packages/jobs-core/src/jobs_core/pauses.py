"""Paused job types (issue 24): an operator stops the claims of one type, for every org, and
starts them again later. Queued jobs of a paused type stay queued, untouched; a running job
runs to its end. The claim is where the pause is applied (:func:`jobs_core.claims.choose`, step
1, and its SQL form in ``jobs_postgres.claims``); the store keeps the pauses
(:class:`jobs_core.ports.TypePauses`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class TypePause:
    """A paused type: since when, and who paused it (``api:<org>``, ``cli:<user>``...)."""

    type: str
    paused_at: datetime
    paused_by: str
