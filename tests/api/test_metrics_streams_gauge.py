"""The open-streams gauge reads its app's counter at scrape time, never a provider: an app whose
container was reset since (another test's, in the same process) does not break a scrape."""

from __future__ import annotations

from jobs_api.app import create_app
from jobs_api.containers import build_container
from jobs_api.settings import ApiSettings
from jobs_metrics import exposition

from tests.api.helpers import make_registry


def test_a_scrape_after_the_apps_container_was_reset() -> None:
    container = build_container(ApiSettings(store="memory"), [make_registry()])
    create_app(container)
    container.reset_override()  # its options are undefined now, as after an API test
    assert b"jobs_event_streams_open 0.0" in exposition()
