"""Property-based: schemathesis generates requests from the OpenAPI schema, valid and invalid,
for every operation, and checks each response: never a 5xx, and status, content type, headers
and body all as the schema documents them."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis import CheckFunction
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.profiles import scaled

pytestmark = pytest.mark.slow  # ~10 s: 20 generated requests per operation and mode

EXAMPLES_PER_OPERATION = 20
"""Per operation and mode in the suite (the four runs cost 80-210 s of the suite's time at 40);
``HYPOTHESIS_PROFILE=nightly`` draws 200 (tests/profiles.py). Generation is derandomized, so a
run draws the same requests each time."""

MAX_BODY = 1_048_576
"""The API's default body limit (``JOBS_MAX_BODY_BYTES``)."""

_ANY_TEXT = {"type": "string"}
_ANNOTATIONS = {"description", "title"}


def _accepts_invalid_input(operation: Any) -> bool:
    """Whether some request to ``operation`` breaks its schema once sent over HTTP.

    A body can always be wrong. A path or query parameter can only be wrong if its schema says
    more than "any text": every value travels as text, so a string parameter without a format,
    a pattern or a length admits whatever a client sends (a malformed job id is a 404 by design,
    exactly like an absent one).
    """
    if operation.body:
        return True
    for parameter in operation.iter_parameters():
        schema = parameter.definition.get("schema", {})
        if {k: v for k, v in schema.items() if k not in _ANNOTATIONS} != _ANY_TEXT:
            return True
    return False


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_honours_the_schema(
    app: FastAPI, as_a: dict[str, str], mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    # The test sends a valid token itself (``headers=as_a``): were schemathesis to generate the
    # bearer header too, a negative case whose only invalid part is that header would be sent
    # valid, and its 200 reported as "accepted negative data" (the flaky GET /jobs?type=false).
    # Missing and malformed tokens have their own test (tests/api/test_routes.py, 401s alike).
    schema.config.generation.update(with_security_parameters=False)
    operations = [r.ok() for r in schema.get_all_operations() if isinstance(r, Ok)]
    # /jobs, /healthz, /job-types, /jobs/events, /session (3), /quotas and /settings/quotas (3),
    # /overview, /jobs/lookup, /jobs/bulk, the pause and resume of a type, /batches and
    # /jobs/{id}/awaited; /schedules and /settings/retention on PostgreSQL only.
    postgres = app.state.container.config.store() == "postgres"
    assert len(operations) == (32 if postgres else 24)
    # The event stream never ends: tests/api/test_events_http.py checks it on a real server.
    operations = [o for o in operations if o.path != "/jobs/events"]

    seen: dict[str, set[int]] = defaultdict(set)
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not _accepts_invalid_input(operation):
            continue  # e.g. /healthz, GET /jobs/{job_id}: there is no invalid request to make

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=scaled(EXAMPLES_PER_OPERATION),
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case[Any]) -> None:
            if mode is GenerationMode.NEGATIVE and any(
                isinstance(value, list | dict) for value in (case.query or {}).values()
            ):
                # An array or object in the query is serialized away (GET /jobs?type=[] is sent
                # as GET /jobs): the request that reaches the API may be a valid one.
                return
            if (
                mode is GenerationMode.NEGATIVE
                and len(json.dumps(case.body, default=repr)) > MAX_BODY
            ):
                # Too many batch members of generated payloads: a body over the API's limit is
                # refused whole (413, tests/api/test_bodies_http.py), before any schema check.
                return
            excluded: list[CheckFunction] = []
            if case.query and "cursor" in case.query:
                # A cursor is valid only if the API made it (base64 of created_at|id): a random
                # string that fits the cursor's schema is rightly a 422, not an accepted request.
                excluded.append(positive_data_acceptance)
            if case.operation.path in ("/jobs/lookup", "/jobs/bulk"):
                # What a search text is (a whole id, 8 digits, a prefix of at least 8) and "ids
                # or a filter, not both" are checked by the API (422 with the reason).
                excluded.append(positive_data_acceptance)
            if isinstance(case.body, dict) and case.body.get("depends_on"):
                # Ids of the org's jobs: a random UUID names none, rightly a 422 naming it (the
                # schema cannot say which ids exist).
                excluded.append(positive_data_acceptance)
            if case.operation.path.startswith(("/schedules", "/settings")):
                # A cron expression, a time zone, a schedule's name or a retention policy is
                # checked by the API (422 with the reason), not expressible in the schema.
                excluded.append(positive_data_acceptance)
            response = case.call_and_validate(headers=as_a, excluded_checks=excluded)
            seen[case.operation.label].add(response.status_code)

        check()

    if mode is GenerationMode.POSITIVE:
        # The run reached the happy paths, not only the error handlers.
        assert 202 in seen["POST /jobs"], seen
        assert 200 in seen["GET /jobs"], seen
    else:
        # Each operation that has an invalid request got some, and every one was refused.
        assert {"POST /jobs", "GET /jobs"} <= seen.keys(), seen
        assert all(code >= 400 for codes in seen.values() for code in codes), seen
