"""The module's SQL: every read and write of ``linkcheck_crawls`` and ``linkcheck_results``.

Each function takes an engine (or a connection, when it is part of a caller's transaction) and
runs short statements; a lost database surfaces as :class:`jobs_core.StoreUnavailable`
(``unavailable_as_store_error``), which the job types retry with backoff.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from jobs_postgres.errors import unavailable_as_store_error
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects.postgresql import insert

from jobs_linkcheck.fetch import PageResult
from jobs_linkcheck.tables import crawls, results

FETCH = "linkcheck_fetch"
"""The job type that fetches one page of a crawl."""

FINAL = ("done", "failed", "cancelled")
"""Crawl statuses that never change again."""


@dataclass(frozen=True, slots=True)
class Crawl:
    """One row of ``linkcheck_crawls``."""

    id: uuid.UUID
    org_id: str
    site: str
    start_url: str
    max_pages: int
    status: str
    pages: int
    broken: int
    error: str | None
    created_at: datetime
    finished_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        """The crawl as the API shows it."""
        return {
            "id": str(self.id),
            "site": self.site,
            "start_url": self.start_url,
            "max_pages": self.max_pages,
            "status": self.status,
            "pages": self.pages,
            "broken": self.broken,
            "error": self.error,
            "created_at": self.created_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


@contextmanager
def connected(engine: Engine) -> Iterator[Connection]:
    """A transaction on ``engine``; a lost database raises ``StoreUnavailable``."""
    with unavailable_as_store_error(), engine.begin() as conn:
        yield conn


# -- crawls ------------------------------------------------------------------------------------


def insert_crawl(
    conn: Connection,
    crawl_id: uuid.UUID,
    org_id: str,
    *,
    site: str,
    start_url: str,
    max_pages: int,
) -> None:
    """The crawl's row, ``queued`` (nothing if it exists: a job enqueued without the route)."""
    conn.execute(
        insert(crawls)
        .values(id=crawl_id, org_id=org_id, site=site, start_url=start_url, max_pages=max_pages)
        .on_conflict_do_nothing(index_elements=["id"])
    )


def mark_running(conn: Connection, crawl_id: uuid.UUID) -> None:
    """The crawl's handler runs (again, after a crash: a ``running`` row stays ``running``)."""
    conn.execute(
        sa.update(crawls)
        .where(crawls.c.id == crawl_id, crawls.c.status.not_in(FINAL))
        .values(status="running")
    )


def finish(conn: Connection, crawl_id: uuid.UUID, status: str, error: str | None = None) -> None:
    """End the crawl with ``status`` and its counts; a crawl that already ended is left alone
    (a hook that runs after the handler marked it ``done`` changes nothing)."""
    fetched = sa.and_(results.c.crawl_id == crawl_id, results.c.fetched_at.is_not(None))
    pages = sa.select(sa.func.count()).where(fetched).scalar_subquery()
    broken = (
        sa.select(sa.func.count())
        .where(fetched, sa.or_(results.c.status_code.is_(None), results.c.status_code >= 400))
        .scalar_subquery()
    )
    conn.execute(
        sa.update(crawls)
        .where(crawls.c.id == crawl_id, crawls.c.status.not_in(FINAL))
        .values(
            status=status,
            error=error,
            pages=pages,
            broken=broken,
            finished_at=sa.func.now(),
        )
    )


def crawl_status(conn: Connection, crawl_id: uuid.UUID) -> str | None:
    """The crawl's status (None: no such crawl)."""
    return conn.scalar(sa.select(crawls.c.status).where(crawls.c.id == crawl_id))


def get_crawl(conn: Connection, org_id: str, site: str, crawl_id: uuid.UUID) -> Crawl | None:
    """The org's crawl of ``site`` (None for another org's, or another site's)."""
    row = conn.execute(
        sa.select(crawls).where(
            crawls.c.id == crawl_id, crawls.c.org_id == org_id, crawls.c.site == site
        )
    ).one_or_none()
    return None if row is None else Crawl(**row._mapping)


def list_crawls(conn: Connection, org_id: str, site: str, limit: int = 50) -> list[Crawl]:
    """The org's crawls of ``site``, newest first."""
    rows = conn.execute(
        sa.select(crawls)
        .where(crawls.c.org_id == org_id, crawls.c.site == site)
        .order_by(crawls.c.created_at.desc(), crawls.c.id.desc())
        .limit(limit)
    )
    return [Crawl(**row._mapping) for row in rows]


# -- results -----------------------------------------------------------------------------------


def hand_out(conn: Connection, crawl_id: uuid.UUID, urls: Sequence[str]) -> None:
    """A result row for each URL of a wave that has none yet (a wave handed out again after a
    crash finds its rows there); each fetch fills its URL's row (:func:`record`)."""
    if not urls:
        return
    conn.execute(
        insert(results)
        .values([{"crawl_id": crawl_id, "url": url} for url in urls])
        .on_conflict_do_nothing(index_elements=["crawl_id", "url"])
    )


def fetched(
    conn: Connection, crawl_id: uuid.UUID, urls: Sequence[str]
) -> list[tuple[str, list[str]]]:
    """Of ``urls``, those whose fetch is recorded, with the same-site links found there."""
    if not urls:
        return []
    rows = conn.execute(
        sa.select(results.c.url, results.c.links).where(
            results.c.crawl_id == crawl_id,
            results.c.url.in_(list(urls)),
            results.c.fetched_at.is_not(None),
        )
    )
    return [(url, list(links or [])) for url, links in rows]


def is_fetched(conn: Connection, crawl_id: uuid.UUID, url: str) -> bool:
    """True when the fetch of ``url`` is recorded already (a fetch job run again after a
    crash does not fetch again)."""
    return bool(
        conn.scalar(
            sa.select(results.c.fetched_at.is_not(None)).where(
                results.c.crawl_id == crawl_id, results.c.url == url
            )
        )
    )


def record(conn: Connection, crawl_id: uuid.UUID, result: PageResult) -> None:
    """Record what a fetch found (the first record of a URL wins)."""
    conn.execute(
        sa.update(results)
        .where(
            results.c.crawl_id == crawl_id,
            results.c.url == result.url,
            results.c.fetched_at.is_(None),
        )
        .values(
            status_code=result.status_code,
            error=result.error,
            location=result.location,
            links=result.links,
            fetched_at=sa.func.now(),
        )
    )


def list_results(
    conn: Connection, crawl_id: uuid.UUID, *, broken_only: bool = False
) -> list[dict[str, Any]]:
    """The crawl's checked URLs in URL order: status, error, redirect target, and the pages of
    the crawl that link to it (``linked_from``: where to fix a broken link)."""
    linking = results.alias("linking")
    linked_from = (
        sa.select(sa.func.array_agg(sa.func.distinct(linking.c.url)))
        .where(linking.c.crawl_id == crawl_id, linking.c.links.has_key(results.c.url))
        .scalar_subquery()
    )
    query = (
        sa.select(
            results.c.url,
            results.c.status_code,
            results.c.error,
            results.c.location,
            linked_from.label("linked_from"),
        )
        .where(results.c.crawl_id == crawl_id, results.c.fetched_at.is_not(None))
        .order_by(results.c.url)
    )
    if broken_only:
        query = query.where(sa.or_(results.c.status_code.is_(None), results.c.status_code >= 400))
    return [
        {**row._mapping, "linked_from": sorted(row.linked_from or [])}
        for row in conn.execute(query)
    ]
