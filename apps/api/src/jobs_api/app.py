"""The FastAPI application of jobs, and the function that serves it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI
from fastapi_offline import FastAPIOffline
from jobs_core.tracing import use_process_tracer
from jobs_metrics import watch_streams

from jobs_api.api_docs import install_redoc
from jobs_api.auth import current_org_blocking
from jobs_api.containers import Container, build_container
from jobs_api.events import router as events_router
from jobs_api.guard import AuthenticateFirst, KeepConnectionOnError
from jobs_api.job_types import router as job_types_router
from jobs_api.limits import BodySizeLimit
from jobs_api.metrics import router as metrics_router
from jobs_api.openapi import openapi_builder
from jobs_api.overview import router as overview_router
from jobs_api.panel import build_router as build_panel_router
from jobs_api.problems import install_problem_handlers, unexpected_error
from jobs_api.quotas import router as quotas_router
from jobs_api.routes import router
from jobs_api.schedules import router as schedules_router
from jobs_api.sessions import install_session_handlers
from jobs_api.sessions import router as sessions_router
from jobs_api.tracing import ContinueTrace
from jobs_api.waits import router as waits_router

log = logging.getLogger("jobs.api")

API_VERSION = "1.0.0"
DOCS_ASSETS = "/docs-assets"
"""Where /docs and /redoc load Swagger UI and ReDoc from (the files of fastapi-offline)."""

SHUTDOWN_GRACE_S = 5
"""At shutdown, how long open responses (event streams) may run before they are cancelled."""


def _module_routes(container: Container) -> tuple[list[APIRouter], dict[str, int]]:
    """The routers of the served modules and their body limits (``{path: bytes}``).

    Each module owns its routes (:attr:`jobs_core.modules.Module.routers`); the app gives its
    builder the module context (the API's engine, settings, clock) and the org dependency, and
    mounts every router behind that dependency: no module route is anonymous.
    """
    from jobs_core.modules import RouteContext, servable

    context = container.module_context()
    routers: list[APIRouter] = []
    limits: dict[str, int] = {}
    for module in servable(container.modules(), context):
        if module.body_limits is not None:
            limits.update(module.body_limits(context))
        if module.routers is None:
            continue
        route_context = RouteContext(module=context, current_org=current_org_blocking)
        for built in module.routers(route_context):
            if not isinstance(built, APIRouter):
                raise TypeError(
                    f"module {module.name!r}: routers gave a {type(built).__name__}, "
                    "not a fastapi.APIRouter"
                )
            _check_schema(module.name, built)
            routers.append(built)
    return routers, limits


def _check_schema(name: str, router: APIRouter) -> None:
    """Build the OpenAPI schema of a module's routes now: a route whose schema cannot be built
    (a model pydantic has no JSON schema for) fails the API's start with the module's name,
    instead of ``/openapi.json`` answering 500 for every route later."""
    from fastapi.openapi.utils import get_openapi

    try:
        get_openapi(title=name, version=API_VERSION, routes=router.routes)
    except Exception as error:
        raise ModuleRoutesInvalid(
            f"module {name!r}: the OpenAPI schema of its routes cannot be built"
            f" ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''});"
            " fix the route's models (every body, parameter and response needs a JSON schema)"
        ) from error


class ModuleRoutesInvalid(RuntimeError):
    """A module's routes cannot be served (their OpenAPI schema cannot be built)."""


def create_app(container: Container | None = None) -> FastAPI:
    """The API over ``container`` (by default one built from the environment, with no job
    types: a deployable passes a container whose registry holds its modules' types)."""
    container = container or build_container()
    threads = int(container.config.api_threads())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Build the store at startup so a bad configuration fails the start, not a request.
        container.service()
        if container.config.events():
            await container.event_hub().start()  # the process's one reader of the event log
        # As many threads as the engine pools connections (containers._engine): a blocking
        # call never waits for a connection, and no connection is opened per request.
        to_thread.current_default_thread_limiter().total_tokens = threads
        try:
            yield
        finally:
            container.event_hub().stop()
            container.shutdown_resources()

    # /docs and /redoc load Swagger UI and ReDoc from the files fastapi-offline installs (served
    # under DOCS_ASSETS), never from a CDN: they work on a machine without internet.
    app = FastAPIOffline(
        static_url=DOCS_ASSETS,
        redoc_url=None,  # jobs_api.api_docs serves it, with a policy that keeps it offline
        title="jobs",
        version=API_VERSION,
        description=(
            "Background jobs on PostgreSQL. Every `/jobs` route acts for the org of the bearer "
            "token; another org's jobs are indistinguishable from absent ones."
        ),
        lifespan=lifespan,
    )
    app.state.container = container
    install_redoc(app, DOCS_ASSETS)
    install_problem_handlers(app)
    install_session_handlers(app)
    store = container.config.store()
    module_routers, path_limits = _module_routes(container)
    # Innermost first: the last added runs first (the token is checked before the body limit).
    app.add_middleware(KeepConnectionOnError, on_error=unexpected_error)
    app.add_middleware(
        BodySizeLimit, max_bytes=int(container.config.max_body_bytes()), path_limits=path_limits
    )
    app.add_middleware(AuthenticateFirst, token_cache=container.token_cache)
    tracer = container.tracer()
    if tracer.enabled:  # the request's trace context around the enqueue (decision 0039)
        app.add_middleware(ContinueTrace, tracer=tracer)
        if container.config.tracing():  # JOBS_TRACING=1: the modules' services trace too
            use_process_tracer(tracer)
    app.include_router(events_router)  # before /jobs/{job_id}, which would take its path
    app.include_router(overview_router)  # before /jobs/{job_id}, which would take /jobs/lookup
    app.include_router(waits_router)  # before /jobs/{job_id}, as the event stream
    app.include_router(router)
    app.include_router(job_types_router)
    app.include_router(sessions_router)
    app.include_router(quotas_router)
    app.include_router(metrics_router)
    # The gauge reads this app's counter at scrape time: built now, so a scrape never builds a
    # provider (a test's container may be reset by then: the scrape of another app broke).
    stream_limits = container.stream_limits()
    watch_streams(lambda: stream_limits.total)
    if store == "postgres":  # schedules and settings live in PostgreSQL tables
        app.include_router(schedules_router)
    app.include_router(build_panel_router())
    for module_router in module_routers:
        app.include_router(module_router, dependencies=[Depends(current_org_blocking)])
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
    # An event stream never ends by itself: at shutdown, uvicorn waits this long for open
    # responses, then cancels them (the clients reconnect with Last-Event-ID elsewhere).
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
