"""The FastAPI application of jobs, and the function that serves it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from jobs_api.containers import Container, build_container
from jobs_api.limits import BodySizeLimit
from jobs_api.problems import PROBLEM_MEDIA_TYPE, Problem, install_problem_handlers
from jobs_api.routes import router

log = logging.getLogger("jobs.api")

API_VERSION = "1.0.0"


def create_app(container: Container | None = None) -> FastAPI:
    """The API over ``container`` (by default one built from the environment, with no job
    types: a deployable passes a container whose registry holds its modules' types)."""
    container = container or build_container()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Build the store at startup so a bad configuration fails the start, not a request.
        container.service()
        try:
            yield
        finally:
            container.shutdown_resources()

    app = FastAPI(
        title="jobs",
        version=API_VERSION,
        description=(
            "Background jobs on PostgreSQL. Every `/jobs` route acts for the org of the bearer "
            "token; another org's jobs are indistinguishable from absent ones."
        ),
        lifespan=lifespan,
    )
    app.state.container = container
    install_problem_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=int(container.config.max_body_bytes()))
    app.include_router(router)
    _document_problems(app)
    return app


def _document_problems(app: FastAPI) -> None:
    """Make the error responses of the OpenAPI schema point to the ``Problem`` schema, under the
    problem media type only (FastAPI would also list them as ``application/json``)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        for path_item in schema["paths"].values():
            for operation in path_item.values():
                for response in operation.get("responses", {}).values():
                    content = response.get("content", {})
                    if PROBLEM_MEDIA_TYPE in content:
                        problem_schema = content.pop("application/json", {}).get("schema")
                        content[PROBLEM_MEDIA_TYPE] = {"schema": problem_schema}
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in problem.pop("$defs", {}).items():
            components.setdefault(name, definition)
        components.setdefault("Problem", problem)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def serve(
    container: Container | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
) -> None:
    """Run the API with uvicorn until SIGINT/SIGTERM (the ``jobs api`` command)."""
    app = create_app(container)
    log.info("serving the jobs API on http://%s:%d", host, port)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
