"""The payload schema (``assets/payload.schema.json``) is the contract between Python and the page.

Python side: every payload the views write (graph, overlay, delegate, pass stepper with a failure,
compare, and the pages the report embeds) validates against it, node details included, and the
TypedDicts of :mod:`etlens.views.html.payload_types` declare the same keys. Browser side: the page,
started with a key-recording Set, reads only key paths the schema declares. Also the build step
that bundles the ES modules (:func:`etlens.views.html.render.bundle_js`).
"""

from __future__ import annotations

import json
import typing

import pytest

from etlens.errors import EtlensError
from etlens.model import Graph, Node
from etlens.views.html import generate_compare_html, generate_html, generate_multi_pass_html
from etlens.views.html import payload_types as pt
from etlens.views.html import render
from etlens.views.html.payload_types import payload_schema
from etlens.views.html.synthetic import synthetic_graph

from tests.views.html._viewer_graphs import hostile, lowered, tiny

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture
def captured(monkeypatch):
    """Every payload handed to the page renderer while the test runs."""
    seen: list[dict] = []
    real = render.render_page

    def spy(payload):
        seen.append(json.loads(render.embed_json(payload)))  # exactly what the page gets
        return real(payload)

    monkeypatch.setattr(render, "render_page", spy)
    from etlens.views.html import api  # the page builders hold their own reference to render_page

    monkeypatch.setattr(api, "render_page", spy)
    return seen


def _validate(payload: dict) -> None:
    schema = payload_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(payload, schema, cls=jsonschema.Draft202012Validator)
    details = {"$ref": "#/$defs/node_details", "$defs": schema["$defs"]}
    for gp in payload["graphs"]:
        for sid in gp["nodes"]["details"]:
            if sid >= 0:
                jsonschema.validate(json.loads(payload["strings"][sid]), details,
                                    cls=jsonschema.Draft202012Validator)


def _trace_with_failure() -> dict:
    a, b = tiny("a"), tiny("b")
    b.add(Node("extra", target="aten.neg.default", inputs=["relu"]))
    b._nodes["relu"] = Node("relu", target="aten.sigmoid.default", inputs=["linear"])  # a rewritten target
    return {"schema": "etlens.trace", "version": 1, "model": "m", "backend": "xnnpack", "snapshots": [
        {"name": "export", "stage": "aten", "index": 0, "wall_time_s": 0.01, "graph": a.to_json(),
         "diff": None, "nodes_delta": 0, "error": None},
        {"name": "bad_pass", "stage": "edge", "index": 1, "wall_time_s": None, "graph": b.to_json(),
         "diff": None, "nodes_delta": None,
         "error": {"type": "RuntimeError", "message": "boom", "traceback": "Traceback ..."}}]}


def test_every_viewer_payload_validates(tmp_path, captured):
    generate_html(tiny(), tmp_path / "t.html")
    generate_html(hostile(), tmp_path / "h.html")
    generate_html(lowered(), tmp_path / "l.html", overlay={"cumsum": 2.0, "x": float("inf")}, overlay_label="ms")
    generate_html(synthetic_graph(1500), tmp_path / "s.html")
    generate_html(Graph("empty"), tmp_path / "e.html")
    generate_multi_pass_html(_trace_with_failure(), tmp_path / "p.html")
    generate_multi_pass_html([("a", tiny("a")), ("b", lowered())], tmp_path / "p2.html")
    generate_compare_html({"aten": tiny(), "lowered": lowered(), "again": tiny()}, tmp_path / "c.html")
    assert [p["mode"] for p in captured] == ["single"] * 5 + ["passes"] * 2 + ["compare"]
    for payload in captured:
        _validate(payload)
    snaps = captured[5]["graphs"][0]["snapshots"]
    assert "error" in snaps[1] and "target_overrides" in snaps[0]  # the optional keys were exercised


def test_report_payloads_validate(committed, tmp_path, captured):
    from etlens.model.trace import Snapshot, Trace
    from etlens.report import report_from_artifacts

    case = committed["mlp_portable"]
    trace = Trace(model="m", backend="portable",
                  snapshots=[Snapshot(name="export", stage="aten", index=0, graph=tiny("a")),
                             Snapshot(name="edge", stage="edge", index=1, graph=lowered())])
    report_from_artifacts(case.etdump, str(tmp_path / "report.html"), etrecord=case.etrecord,
                          debug_buffer=case.debug_buffer, pte=case.pte, trace=trace)
    modes = [p["mode"] for p in captured]
    assert "single" in modes and "passes" in modes, modes
    for payload in captured:
        _validate(payload)


def test_schema_rejects_the_old_terse_keys(tmp_path, captured):
    generate_html(tiny(), tmp_path / "t.html")
    old = dict(captured[0])
    old["S"] = old.pop("strings")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(old, payload_schema(), cls=jsonschema.Draft202012Validator)


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


@pytest.mark.parametrize("typed, definition", [
    (pt.Payload, None), (pt.GraphPayload, "graph"), (pt.NodeColumns, "node_columns"),
    (pt.GroupColumns, "group_columns"), (pt.SnapshotRecord, "snapshot"), (pt.SnapshotError, None),
    (pt.OverlayScale, "overlay_scale"), (pt.NodeDetails, "node_details"), (pt.DelegateDetails, None),
])
def test_typeddicts_match_the_schema(typed, definition):
    schema = payload_schema()
    if typed is pt.SnapshotError:
        node = schema["$defs"]["snapshot"]["properties"]["error"]
    elif typed is pt.DelegateDetails:
        node = schema["$defs"]["node_details"]["properties"]["delegate"]
    else:
        node = _resolve(schema, schema["$defs"][definition]) if definition else schema
    assert set(typing.get_type_hints(typed)) == set(node["properties"])
    if typed not in (pt.NodeDetails, pt.DelegateDetails):  # details are free-form on the Python side
        assert set(typed.__required_keys__) == set(node.get("required", []))
    assert node.get("additionalProperties") is False
    assert schema["properties"]["version"]["const"] == pt.PAYLOAD_VERSION


def test_schema_ships_with_the_package():
    from importlib import resources

    text = resources.files("etlens.views.html").joinpath("assets", "payload.schema.json").read_text("utf-8")
    assert json.loads(text)["$id"] == "etlens.viewer.payload"


# -- the build step ---------------------------------------------------------------------------------
def _bundle(files: dict[str, str]) -> str:
    return render.bundle_js(files.__getitem__)


def test_bundle_orders_modules_and_keeps_private_names_private():
    js = _bundle({
        "main.js": "import { b } from './b.js';\nimport { a } from './a.js';\nb(a);\n",
        "b.js": "import { a } from './a.js';\nconst extra = 1;\nexport function b(x) { return x + a + extra; }\n",
        "a.js": "const base = 2;\nexport const a = base;\n",
    })
    assert js.index("---- a.js") < js.index("---- b.js") < js.index("---- main.js")
    assert "import " not in js and "export " not in js
    assert "const { a } = (() => {" in js and "return { b };" in js


@pytest.mark.parametrize("files, message", [
    ({"main.js": "import { nope } from './a.js';\n", "a.js": "export const a = 1;\n"}, "does not export"),
    ({"main.js": "import { a } from './a.js';\nimport { b } from './b.js';\n", "a.js": "export const a = 1;\n",
      "b.js": "export const a = 2;\nexport const b = 3;\n"}, "exported by both"),
    ({"main.js": "export default 1;\n"}, "unsupported module syntax"),
    ({"main.js": "import * as a from './a.js';\n", "a.js": "export const a = 1;\n"}, "unsupported module syntax"),
    ({"main.js": "import { a } from './a.js';\n", "a.js": "import { m } from './main.js';\nexport const a = 1;\n"},
     "import cycle"),
])
def test_bundle_rejects_what_it_cannot_combine(files, message):
    with pytest.raises(EtlensError, match=message):
        _bundle(files)


def test_page_code_is_one_classic_script(tmp_path):
    html = open(generate_html(tiny(), tmp_path / "t.html"), encoding="utf-8").read()
    code = html.rsplit("<script>", 1)[1].split("</script>", 1)[0]
    assert code.startswith("(() => {\n'use strict';") and "class App" in code and "class View" in code
    assert "\nimport " not in code and "\nexport " not in code


# -- in the browser: the page reads only declared keys ----------------------------------------------
def _declared(schema: dict, path: str) -> bool:
    """Whether a recorded key path ("graphs[].nodes.label", "node_details.delegate.ops") is declared."""
    parts = path.replace("[]", "").split(".")
    if parts[0] == "node_details":
        node, parts = schema["$defs"]["node_details"], parts[1:]
    else:
        node = schema
    for key in parts:
        node = _resolve(schema, node)
        if node.get("type") == "array" or "items" in node:
            node = _resolve(schema, node["items"])
        if key == "*":
            if node.get("type") not in ("object", ["object", "null"]) and "properties" not in node:
                return False
            continue
        props = node.get("properties", {})
        if key in props:
            node = props[key]
        elif isinstance(node.get("additionalProperties"), dict) or node.get("additionalProperties") is True:
            extra = node.get("additionalProperties")
            node = extra if isinstance(extra, dict) else {}
        else:
            return False
        node = _resolve(schema, node)
        if "items" in node:
            node = _resolve(schema, node["items"]) if isinstance(node["items"], dict) else node
    return True


@pytest.mark.browser
def test_the_page_reads_only_keys_the_schema_declares(browser, tmp_path):
    pages = {
        "overlay": generate_html(lowered(), tmp_path / "o.html", overlay={"cumsum": 2.0}, overlay_label="ms"),
        "tiny": generate_html(tiny(), tmp_path / "t.html"),
        "passes": generate_multi_pass_html(_trace_with_failure(), tmp_path / "p.html"),
        "compare": generate_compare_html({"aten": tiny(), "lowered": lowered()}, tmp_path / "c.html"),
    }
    read: set[str] = set()
    for kind, path in pages.items():
        page = browser.new_page(viewport={"width": 1300, "height": 850})
        errors: list[str] = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        page.add_init_script("window.etlensKeyTrace = new Set();")
        page.goto("file://" + str(path))
        for _ in range(200):
            if page.evaluate("() => window.etlensReady === true"):
                break
            page.wait_for_timeout(25)
        names = {"overlay": ["call_delegate", "cumsum", "call_delegate/mm"], "tiny": ["linear", "relu"],
                 "passes": ["linear", "relu", "extra"], "compare": ["linear"]}[kind]
        for name in names:
            pos = page.evaluate("([n]) => window.etlens.screenPos(n, 0)", [name])
            page.mouse.click(pos["x"], pos["y"])
        if kind == "passes":
            page.evaluate("() => window.etlens.step(1)")
            page.evaluate("() => window.etlens.step(0)")
        page.fill("#etl-search", "linear")
        page.press("#etl-search", "Enter")
        page.evaluate("() => window.etlens.svg()")
        read |= set(page.evaluate("() => Array.from(window.etlensKeyTrace)"))
        assert errors == [], (kind, errors)
        page.close()
    schema = payload_schema()
    undeclared = sorted(p for p in read if not _declared(schema, p))
    assert undeclared == [], undeclared
    # and the recording saw the page really use the payload (not an empty trace)
    for expected in ("strings", "graphs[].nodes.label", "graphs[].groups.parent", "graphs[].snapshots[].present_runs",
                     "graphs[].snapshots[].error", "matches", "overlay.min", "node_details.delegate.backend",
                     "node_details.attrs"):
        assert any(p == expected or p.startswith(expected + ".") for p in read), (expected, sorted(read))
