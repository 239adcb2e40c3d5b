"""The panel's JavaScript modules, unit by unit, in the real browser (no Node.js anywhere).

The API app (on the in-memory store) serves the modules from a uvicorn on a thread; each test
imports one into a blank page of that origin and checks it on inputs chosen to break it: the
event-stream parser fed in every possible chunking, the payload form built from schemas with
enums, optionals, references and nested values, the formatting of targets and durations.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from jobs_api.app import create_app
from jobs_api.containers import build_container
from jobs_api.settings import ApiSettings
from playwright.sync_api import Browser, Page

from tests.cli.helpers import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    """An API (memory store) serving the panel's files, on a thread."""
    port = free_port()
    app = create_app(build_container(ApiSettings(store="memory")))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def page(browser: Browser, origin: str) -> Iterator[Page]:
    """A page of the panel's origin where the modules can be imported."""
    context = browser.new_context()
    opened = context.new_page()
    opened.goto(f"{origin}/signin")  # any page of the origin: the modules load from /panel/
    yield opened
    context.close()


def run(page: Page, module: str, body: str, arg: Any = None) -> Any:
    """Import ``/panel/<module>`` as ``m`` and evaluate ``body`` (an async function body)."""
    return page.evaluate(
        f"""async (arg) => {{
          const m = await import("/panel/{module}");
          {body}
        }}""",
        arg,
    )


STREAM = (
    ": keep-alive\r\n"
    "id: abc\r\n"
    "event: ready\r\n"
    'data: {"resumed": false}\r\n'
    "\r\n"
    "id: def\n"
    "event: job\n"
    'data: {"kind": "progress",\n'
    'data:  "n": 1}\n'
    "\n"
    "retry: 1000\n"
    "\n"
    "data:no space\r"
    "\r"
    ": a comment with: colons\n"
    "event: resync\n"
    "id: ghi\n"
    'data: {"reason": "slow_client"}\n'
    "\n"
)
EXPECTED = [
    {"type": "ready", "data": '{"resumed": false}', "id": "abc"},
    {"type": "job", "data": '{"kind": "progress",\n "n": 1}', "id": "def"},
    {"type": "message", "data": "no space", "id": "def"},
    {"type": "resync", "data": '{"reason": "slow_client"}', "id": "ghi"},
]


def test_the_event_parser_gives_the_same_events_however_the_stream_is_cut(page: Page) -> None:
    results = run(
        page,
        "stream.js",
        """
        const out = [];
        for (let cut = 0; cut <= arg.length; cut += 1) {
          for (const step of [1, 2, 7]) {
            const events = [];
            const parser = new m.EventParser((e) => events.push(e));
            parser.push(arg.slice(0, cut));
            for (let i = cut; i < arg.length; i += step) parser.push(arg.slice(i, i + step));
            out.push(JSON.stringify(events));
          }
        }
        return [...new Set(out)];
        """,
        STREAM,
    )
    assert [json.loads(r) for r in results] == [EXPECTED]


SCHEMA: dict[str, Any] = {
    "$defs": {"Mode": {"enum": ["fast", "thorough"], "type": "string"}},
    "type": "object",
    "properties": {
        "site_id": {"type": "string", "title": "Site", "format": "uuid"},
        "seconds": {"type": "number", "minimum": 0, "maximum": 60},
        "pages": {"type": "integer", "default": 10},
        "mode": {"$ref": "#/$defs/Mode"},
        "dry_run": {"type": "boolean", "default": True},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "urls": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["site_id", "seconds", "mode"],
    "additionalProperties": False,
}


def test_the_form_is_built_from_the_schema_and_reads_typed_values(page: Page) -> None:
    answer = run(
        page,
        "form.js",
        """
        const box = document.createElement("div");
        document.body.append(box);
        const form = new m.PayloadFields(box, arg);
        const kinds = [...form.fields.values()].map((f) => [f.name, f.kind, f.required]);
        const set = (name, value) => { form.fields.get(name).input.value = value; };
        set("site_id", "0b0e7a8e-0000-4000-8000-000000000001");
        set("seconds", " 2.5 ");
        form.fields.get("mode").input.value = JSON.stringify("thorough");
        set("urls", '["https://a.example/"]');
        const first = form.read();
        set("seconds", "abc");
        set("urls", "[not json");
        const second = form.read();
        const labels = [...box.querySelectorAll("label")].map((l) => l.textContent.trim());
        const described = form.fields.get("seconds").input.getAttribute("aria-describedby");
        const hint = document.getElementById(described.split(" ")[0]).textContent;
        return {kinds, first: first.payload, second: second.payload,
                local: second.local.map((e) => e.field.name), labels, hint};
        """,
        SCHEMA,
    )
    assert answer["kinds"] == [
        ["site_id", "string", True],
        ["seconds", "number", True],
        ["pages", "integer", False],
        ["mode", "enum", True],
        ["dry_run", "boolean", False],
        ["note", "string", False],
        ["urls", "json", False],
    ]
    assert answer["first"] == {
        "site_id": "0b0e7a8e-0000-4000-8000-000000000001",
        "seconds": 2.5,
        "pages": 10,
        "mode": "thorough",
        "dry_run": True,
        "urls": ["https://a.example/"],
    }
    # A value that is not a number goes as typed, for the API to name the error.
    assert answer["second"]["seconds"] == "abc"
    assert answer["local"] == ["urls"]
    assert answer["labels"][:2] == ["Site *", "seconds *"]
    assert answer["hint"] == "≥ 0, ≤ 60"


def test_an_empty_required_field_is_refused_before_sending(page: Page) -> None:
    answer = run(
        page,
        "form.js",
        """
        const box = document.createElement("div");
        document.body.append(box);
        const form = new m.PayloadFields(box, arg);
        form.fields.get("site_id").input.value = "   ";  // a required text, only blanks
        form.fields.get("mode").input.value = JSON.stringify("fast");
        form.fields.get("note").input.value = "";  // optional: left out, not refused
        const read = form.read();
        return {local: read.local.map((e) => [e.field.name, e.msg]), payload: read.payload};
        """,
        SCHEMA,
    )
    assert answer["local"] == [["site_id", "Field required"], ["seconds", "Field required"]]
    assert "site_id" not in answer["payload"]
    assert "note" not in answer["payload"]


def test_the_api_errors_land_beside_the_fields_they_name(page: Page) -> None:
    answer = run(
        page,
        "form.js",
        """
        const box = document.createElement("div");
        document.body.append(box);
        const form = new m.PayloadFields(box, arg);
        const rest = form.showErrors([
          {loc: ["body", "payload", "seconds"], msg: "Input should be greater than 0"},
          {loc: ["body", "payload", "seconds"], msg: "and a number"},
          {loc: ["body", "payload", "urls", 0], msg: "not a URL"},
          {loc: ["body", "payload"], msg: "extra field 'x'"},
          {loc: ["body", "dedup_key"], msg: "too long"},
        ]);
        const seconds = form.fields.get("seconds");
        const out = {
          seconds: seconds.error.textContent,
          invalid: seconds.input.getAttribute("aria-invalid"),
          focused: document.activeElement === seconds.input,
          urls: form.fields.get("urls").error.textContent,
          rest: rest.map((e) => e.msg),
        };
        form.clearErrors();
        out.cleared = [seconds.error.textContent, seconds.input.getAttribute("aria-invalid")];
        return out;
        """,
        SCHEMA,
    )
    assert answer == {
        "seconds": "Input should be greater than 0; and a number",
        "invalid": "true",
        "focused": True,
        "urls": "not a URL",
        "rest": ["extra field 'x'", "too long"],
        "cleared": ["", None],
    }


def test_a_schema_without_properties_gets_a_json_area(page: Page) -> None:
    answer = run(
        page,
        "form.js",
        """
        const box = document.createElement("div");
        document.body.append(box);
        const form = new m.PayloadFields(box, {type: "object"});
        const empty = form.read().payload;
        form.free.input.value = '{"any": [1, 2]}';
        const given = form.read().payload;
        form.free.input.value = "{oops";
        const bad = form.read();
        const field = form.fieldOf(["body", "payload", "whatever"]);
        const none = new m.PayloadFields(document.createElement("div"),
          {type: "object", properties: {}, additionalProperties: false});
        return {empty, given, bad: bad.local.length, routed: field === form.free,
                none: none.read().payload};
        """,
    )
    assert answer == {"empty": {}, "given": {"any": [1, 2]}, "bad": 1, "routed": True, "none": {}}


def test_targets_and_durations_read_well(page: Page) -> None:
    answer = run(
        page,
        "format.js",
        """
        return {
          targets: [
            m.target({site_id: "shop.example", seconds: 3}),
            m.target({file_name: "/data/imports/gsc-2026-11.csv"}),
            m.target({import_id: "0b0e7a8e-0000-4000-8000-000000000001"}),
            m.target({seconds: 5}),
            m.target({nested: {a: 1}}),
            m.target({}),
            m.target({url: "https://example.com/" + "x".repeat(60)}),
          ],
          durations: [850, 12_400, 184_000, 7_500_000, 270_000_000].map(m.duration),
          ages: [500, 45_000, 3_600_000 * 3].map(m.age),
          untils: [-5_000, 400, 45_000, 600_000, 39_180_000, 3 * 86_400_000, NaN].map(m.until),
          fractions: [m.fraction({done: 3, total: 4}), m.fraction({done: 3}),
                      m.fraction({done: 9, total: 4}), m.fraction(null)],
        };
        """,
    )
    assert answer["targets"] == [
        "site_id shop.example",
        "gsc-2026-11.csv",
        "import_id 0b0e7a8e",
        "seconds=5",
        "",
        "",
        "https://example.com/xxxxxxxxxxxxxxxxxxx…",
    ]
    assert answer["durations"] == ["850 ms", "12 s", "3 min 4 s", "2 h 5 min", "3 d 3 h"]
    assert answer["ages"] == ["just now", "45 s ago", "3 h ago"]
    assert answer["untils"] == [
        "due now",
        "due now",
        "in 45 s",
        "in 10 min",
        "in 10 h 53 min",
        "in 3 d",
        "",
    ]
    assert answer["fractions"] == [0.75, None, 1, None]
