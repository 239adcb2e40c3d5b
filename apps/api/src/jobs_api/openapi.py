"""The OpenAPI document of the app: FastAPI's, plus two things FastAPI cannot know.

- Error responses are problem documents under ``application/problem+json`` only.
- ``POST /jobs`` accepts exactly the public job types of the registry the app serves, each with
  its payload schema: the request body is a ``oneOf`` discriminated by ``type``, so a client (or
  a generator such as schemathesis) sees which types exist and what each payload must hold.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from jobs_core import Registry

from jobs_api.problems import PROBLEM_MEDIA_TYPE, Problem
from jobs_api.schemas import EnqueueIn

_COMPONENTS = "#/components/schemas/"


def openapi_builder(app: FastAPI, registry: Registry) -> Callable[[], dict[str, Any]]:
    """The ``app.openapi`` function: builds the document once, then serves it from cache."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            _problems_as_problem_json(schema)
            _document_job_types(schema, registry)
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi


def _problems_as_problem_json(schema: dict[str, Any]) -> None:
    """Every error response (4xx, 5xx) is a problem document, whoever declared it: the app's
    routes with ``problem_responses``, a module's router with a bare status and description,
    or FastAPI's own 422."""
    problem_ref = {"$ref": _COMPONENTS + "Problem"}
    for path_item in schema["paths"].values():
        for operation in path_item.values():
            for status, response in operation.get("responses", {}).items():
                if str(status)[:1] not in ("4", "5"):
                    continue
                content = response.setdefault("content", {})
                declared = content.pop("application/json", {}).get("schema")
                if PROBLEM_MEDIA_TYPE in content and declared is not None:
                    content[PROBLEM_MEDIA_TYPE] = {"schema": declared}
                else:
                    content.clear()
                    content[PROBLEM_MEDIA_TYPE] = {"schema": problem_ref}
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    problem = Problem.model_json_schema(ref_template=_COMPONENTS + "{model}")
    for name, definition in problem.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components.setdefault("Problem", problem)


def _document_job_types(schema: dict[str, Any], registry: Registry) -> None:
    public = registry.public_types()
    if not public:
        return  # nothing is enqueueable: the generic EnqueueIn stays, and every type is a 422
    components = schema["components"]["schemas"]
    dedup_key = EnqueueIn.model_json_schema()["properties"]["dedup_key"]
    depends_on = EnqueueIn.model_json_schema()["properties"]["depends_on"]
    variants = {}
    for job_type in public:
        component = f"Enqueue_{_component_name(job_type.name)}"
        payload: dict[str, Any] = {
            "type": "object",
            "propertyNames": {"pattern": NUL_FREE},
            "additionalProperties": {"$ref": _COMPONENTS + "JsonValue"},
        }
        if job_type.payload_schema is not None:
            declared = _hoist_defs(job_type.payload_schema.json_schema(), component, components)
            payload = _nul_free(declared)
        properties: dict[str, Any] = {
            "type": {"type": "string", "const": job_type.name},
            "payload": payload,
            "depends_on": depends_on,
        }
        if job_type.dedup_key is None:
            # A type that owns its key derives it from the payload (docs/flow-control.md): the
            # document offers no key to choose (the same key is accepted, any other is a 422).
            properties["dedup_key"] = dedup_key
        variant = {
            "type": "object",
            "title": f"Enqueue {job_type.name}",
            "description": job_type.description or f"Enqueue a `{job_type.name}` job.",
            "properties": properties,
            # A payload whose schema requires fields must be sent; an absent one is {}.
            "required": ["type", "payload"] if payload.get("required") else ["type"],
            "additionalProperties": False,
        }
        components[component] = variant
        variants[job_type.name] = _COMPONENTS + component
    components["JsonValue"] = _JSON_VALUE
    body = schema["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    body["schema"] = {
        "oneOf": [{"$ref": ref} for ref in variants.values()],
        "discriminator": {"propertyName": "type", "mapping": variants},
    }
    components.pop(EnqueueIn.__name__, None)  # replaced by the variants, referenced nowhere
    _document_batch_jobs(components, variants)


def _document_batch_jobs(components: dict[str, Any], variants: dict[str, str]) -> None:
    """``POST /batches`` names its members and callback as ``POST /jobs`` names a job: one
    variant per public type (its type and payload only)."""
    batch = components.get("BatchIn")
    if batch is None:
        return
    members = {}
    for name, ref in variants.items():
        enqueue = components[ref.removeprefix(_COMPONENTS)]
        component = ref.removeprefix(_COMPONENTS).replace("Enqueue_", "BatchJob_", 1)
        components[component] = {
            **enqueue,
            "title": f"Batch job {name}",
            "properties": {k: enqueue["properties"][k] for k in ("type", "payload")},
        }
        members[name] = _COMPONENTS + component
    one_of = {
        "oneOf": [{"$ref": ref} for ref in members.values()],
        "discriminator": {"propertyName": "type", "mapping": members},
    }
    properties = batch["properties"]
    properties["jobs"]["items"] = one_of
    properties["callback"] = {**one_of, "description": properties["callback"].get("description")}
    components.pop("BatchJobIn", None)


NUL_FREE = "^[^\\x00]*$"
"""Text the stores can hold: PostgreSQL refuses NUL characters (``jobs_core.registry.unstorable``
refuses them at enqueue on every adapter), so every documented string says so."""

_JSON_VALUE = {
    "description": "Any JSON value whose strings and keys hold no NUL character.",
    "anyOf": [
        {"type": "string", "pattern": NUL_FREE},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": _COMPONENTS + "JsonValue"}},
        {
            "type": "object",
            "propertyNames": {"pattern": NUL_FREE},
            "additionalProperties": {"$ref": _COMPONENTS + "JsonValue"},
        },
    ],
}


def _nul_free(node: Any) -> Any:
    """A module's payload schema with a NUL-free pattern on every string and property name."""
    if isinstance(node, list):
        return [_nul_free(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: _nul_free(value) for key, value in node.items()}
    types = result.get("type")
    types = types if isinstance(types, list) else [types]
    if "string" in types:
        if "pattern" in result:
            result = {"allOf": [result, {"pattern": NUL_FREE}]}
        else:
            result["pattern"] = NUL_FREE
    if "object" in types and "propertyNames" not in result:
        result["propertyNames"] = {"pattern": NUL_FREE}
    # Values a schema leaves open (extra properties, untyped items) are still checked by the core
    # for what every store can hold: the document says so instead of promising "anything".
    if "object" in types and result.get("additionalProperties", True) is True:
        result["additionalProperties"] = {"$ref": _COMPONENTS + "JsonValue"}
    if "array" in types and result.get("items", True) is True:
        result["items"] = {"$ref": _COMPONENTS + "JsonValue"}
    return result


def _component_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def _hoist_defs(
    json_schema: dict[str, Any], prefix: str, components: dict[str, Any]
) -> dict[str, Any]:
    """Move a JSON Schema's local ``$defs`` into the components, rewriting its references."""
    json_schema = copy.deepcopy(json_schema)
    defs = json_schema.pop("$defs", {})

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: (
                    _COMPONENTS + f"{prefix}_{value.removeprefix('#/$defs/')}"
                    if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/")
                    else rewrite(value)
                )
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    for name, definition in defs.items():
        components[f"{prefix}_{name}"] = rewrite(definition)
    rewritten: dict[str, Any] = rewrite(json_schema)
    return rewritten
