"""``jobs_core.tracebacks``: what of a handler's traceback a tenant sees. The server's packages'
frames are left out — except the handler's own file when the handler is a function defined in
one of them (the development demo types of ``jobs_worker.demo``): that is the job's code."""

from __future__ import annotations

import uuid
from typing import Any

from jobs_core import FakeClock, JobContext
from jobs_core.domain import NewJob, new_job
from jobs_core.tracebacks import handler_traceback
from jobs_worker import demo
from jobs_worker.child import ChildSpec, SubprocessHandler


def _raised(handler: Any) -> BaseException:
    spec = NewJob("org", "fail", {"message": "no such site"})
    job = new_job(spec, uuid.uuid4(), FakeClock().now())
    try:
        handler(JobContext(job, progress_sink=lambda _doc: True, now=FakeClock().now))
    except Exception as error:  # the handler's failure, as the runner catches it
        return error
    raise AssertionError("the handler did not raise")


def test_a_demo_handlers_own_frames_are_shown_the_rest_of_the_server_not() -> None:
    error = _raised(demo.fail)
    shown = handler_traceback(error, 10_000, demo.fail)
    assert shown.startswith("Traceback (most recent call last):")
    assert 'File "jobs_worker/demo.py"' in shown
    assert 'File "/' not in shown  # paths relative to their package
    assert "DemoFailure: no such site" in shown
    # without the handler, every frame of a server package is left out (no traceback header)
    assert "jobs_worker" not in handler_traceback(error, 10_000).split(":")[0]
    assert 'File "jobs_worker/demo.py"' not in handler_traceback(error, 10_000)


def test_a_callable_object_handler_exempts_nothing() -> None:
    error = _raised(demo.fail)
    machinery = SubprocessHandler(ChildSpec(argv=("true",), cwd=".", env={}))
    assert 'File "jobs_worker/demo.py"' not in handler_traceback(error, 10_000, machinery)
