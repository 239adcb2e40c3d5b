"""The FastAPI application of jobs, and the function that serves it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI

from jobs_api.containers import Container, build_container
from jobs_api.limits import BodySizeLimit
from jobs_api.openapi import openapi_builder
from jobs_api.problems import install_problem_handlers
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
    app.openapi = openapi_builder(app, container.registry())  # type: ignore[method-assign]
    return app


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
