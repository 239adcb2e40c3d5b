"""Property-based, over the Imports routes on PostgreSQL: schemathesis generates requests from the
OpenAPI document, valid and invalid, and checks every response: never a 5xx, and status, content
type and body as documented (issue 11: a NUL in a site target name was a 500)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import schemathesis
from dependency_injector import providers
from hypothesis import HealthCheck, given, settings
from jobs_api.app import create_app
from jobs_api.containers import Container, build_container
from jobs_api.settings import ApiSettings
from jobs_core import FakeClock, Registry
from jobs_imports.module import module as imports_module
from jobs_tokens import issue_token
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.imports.helpers import ORG
from tests.profiles import scaled

if TYPE_CHECKING:
    from sqlalchemy import Engine

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

EXAMPLES_PER_OPERATION = 30


@pytest.fixture
def container(imports_engine: Engine, data_dir: Path) -> Iterator[Container]:
    """The API's container as ``jobs api`` builds it, on the test database."""
    settings_ = ApiSettings(store="postgres", data_dir=data_dir, max_upload_bytes=65536)
    built = build_container(settings_, [Registry("none")], modules=[imports_module])
    built.engine.override(providers.Object(imports_engine))
    built.clock.override(providers.Object(FakeClock()))
    yield built
    built.reset_override()


_ANY_TEXT = {"type": "string"}


def _accepts_invalid_input(operation: Any) -> bool:
    """Whether some request to ``operation`` breaks its schema once sent over HTTP: a body can
    always be wrong; a path or query parameter only if its schema says more than "any text"."""
    if operation.body:
        return True
    for parameter in operation.iter_parameters():
        schema = parameter.definition.get("schema", {})
        if {k: v for k, v in schema.items() if k not in {"description", "title"}} != _ANY_TEXT:
            return True
    return False


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_imports_operation_honours_the_schema(
    container: Container, mode: GenerationMode
) -> None:
    token, _ = issue_token(container.token_store(), ORG, "tests", container.clock().now())
    auth = {"Authorization": f"Bearer {token}"}
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(container))
    # The test sends a valid token itself: a generated bearer header would be replaced by it,
    # and a negative case whose only invalid part was that header would pass as accepted.
    schema.config.generation.update(with_security_parameters=False)
    operations = [
        r.ok()
        for r in schema.get_all_operations()
        if isinstance(r, Ok) and r.ok().path.startswith(("/site-targets", "/imports"))
    ]
    assert len(operations) == 10  # with PUT/GET /site-targets/{id}/api-source, POST /imports/api
    seen: dict[str, set[int]] = defaultdict(set)
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not _accepts_invalid_input(operation):
            continue  # GET /site-targets/{id}: any text is a valid id to ask for (404)

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=scaled(EXAMPLES_PER_OPERATION),
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: schemathesis.Case[Any]) -> None:
            # A string the schema allows may still be refused on its meaning (a base URL on a
            # private host, a site_target_id that is not a UUID of the org's): not a bug. Every
            # other check stays, the 5xx one first.
            response = case.call_and_validate(
                headers=auth, excluded_checks=[positive_data_acceptance]
            )
            seen[case.operation.label].add(response.status_code)

        check()
    assert all(code < 500 for codes in seen.values() for code in codes), seen
    if mode is GenerationMode.POSITIVE:
        assert 201 in seen["POST /site-targets"], seen
