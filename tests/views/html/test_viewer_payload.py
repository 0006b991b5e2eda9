"""Payload and page assembly (no browser): escaping, compactness, groups, passes, CLI."""

from __future__ import annotations

import json
import re

import pytest

from etlens.cli.main import main
from etlens.errors import EtlensError
from etlens.model import Graph, Node
from etlens.views.html import generate_compare_html, generate_html, generate_multi_pass_html
from etlens.views.html.passes import normalize_snapshots
from etlens.views.html.payload import Strings, graph_payload
from etlens.views.html.render import embed_json
from etlens.views.html.synthetic import synthetic_graph

from tests.views.html._viewer_graphs import HOSTILE, hostile, lowered, tiny


def _data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="etlens-data">(.*?)</script>', html, re.S)
    assert m, "data block missing"
    return json.loads(m.group(1))


def test_embed_json_escapes_everything_that_could_end_the_script():
    text = embed_json({"s": "</script><!-- & \u2028\u2029 >"})
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    assert json.loads(text) == {"s": "</script><!-- & \u2028\u2029 >"}


def test_hostile_names_never_appear_raw(tmp_path):
    out = generate_html(hostile(), tmp_path / "h.html")
    html = open(out, encoding="utf-8").read()
    assert html.count("</script>") == 2  # the data block and the code block, nothing else
    assert "<img" not in html and "onerror=alert" not in html.replace("onerror=alert(1)\\u003e", "")
    assert "alert(1)" in html  # the names are there, escaped, as data
    data = _data(html)
    assert set(HOSTILE) <= set(data["strings"])
    # the CSP allows nothing but inline code and data: images
    assert "default-src 'none'" in html and "script-src 'unsafe-inline'" in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html)


def test_page_is_self_contained(tmp_path):
    html = open(generate_html(tiny(), tmp_path / "t.html"), encoding="utf-8").read()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    assert "<link rel=\"stylesheet\"" not in html and "<script src" not in html


def test_columns_and_shared_strings():
    s = Strings()
    gp = graph_payload(synthetic_graph(2000), s)
    cols = gp["nodes"]
    n = len(cols["name"])
    assert all(len(cols[c]) == n for c in ("label", "kind", "target", "category", "shape", "group", "module_stack",
                                           "stack_trace", "debug_handles", "details"))
    # op names and shapes are shared, not repeated per node
    assert s.table.count("aten.linear.default") == 1
    assert len(s.table) < 2 * n


def test_bytes_per_node_goal(tmp_path):
    g = synthetic_graph(10_000)
    generate_html(g, tmp_path / "big.html")
    per_node = (tmp_path / "big.html").stat().st_size / len(g)
    assert per_node <= 400, per_node


def test_module_groups_and_params_follow_users():
    s = Strings()
    gp = graph_payload(tiny(), s)
    names = [s.table[i] for i in gp["nodes"]["name"]]
    groups = gp["groups"]
    fc = [s.table[x] for x in groups["label"]].index("fc")
    # the weight joins the Linear module box of its only user
    assert gp["nodes"]["group"][names.index("w")] == fc
    assert gp["nodes"]["group"][names.index("linear")] == fc
    assert gp["nodes"]["group"][names.index("relu")] == 0


def test_delegate_inner_graph_becomes_a_group():
    s = Strings()
    gp = graph_payload(lowered(), s)
    names = [s.table[i] for i in gp["nodes"]["name"]]
    assert "call_delegate/mm" in names
    kinds = gp["groups"]["kind"]
    dg = kinds.index(3)
    assert gp["nodes"]["group"][names.index("call_delegate/mm")] == dg
    assert gp["groups"]["representative"][dg] == names.index("call_delegate")
    details = json.loads(s.table[gp["nodes"]["details"][names.index("call_delegate")]])
    assert details["delegate"]["backend"] == "XnnpackBackend" and details["delegate"]["payload_size"] == 1234
    # x feeds the inner placeholder, the inner result feeds the call node
    e = gp["edges"]
    pairs = {(names[e[k]], names[e[k + 1]]) for k in range(0, len(e), 2)}
    assert ("x", "call_delegate/a") in pairs and ("call_delegate/out", "call_delegate") in pairs


def test_qdq_cluster():
    g = Graph("q")
    g.add(Node("x", kind="input"))
    g.add(Node("dq", target="quantized_decomposed.dequantize_per_tensor.default", inputs=["x"]))
    g.add(Node("conv", target="aten.convolution.default", inputs=["dq"]))
    g.add(Node("q", target="quantized_decomposed.quantize_per_tensor.default", inputs=["conv"]))
    g.add(Node("output", kind="output", inputs=["q"]))
    s = Strings()
    gp = graph_payload(g, s)
    assert 2 in gp["groups"]["kind"]
    qg = gp["groups"]["kind"].index(2)
    assert [gp["nodes"]["group"][i] == qg for i in range(5)] == [False, True, True, True, False]


def test_overlay_column_and_scale(tmp_path):
    html = open(generate_html(tiny(), tmp_path / "o.html", overlay={"linear": 2.5, "relu": float("nan"), "x": 0.5},
                              overlay_label="latency (ms)"), encoding="utf-8").read()
    data = _data(html)
    assert data["overlay"] == {"label": "latency (ms)", "min": 0.5, "max": 2.5}
    assert data["graphs"][0]["nodes"]["overlay"] == [0.5, None, 2.5, None, None]


def test_snapshots_from_pairs_compute_diffs():
    a, b = tiny("a"), tiny("b")
    b.add(Node("extra", target="aten.neg.default", inputs=["relu"]))
    snaps = normalize_snapshots([("export", a), ("neg", b)])
    assert snaps[1].diff["added"] == ["extra"] and snaps[1].nodes_delta == 1


def test_trace_json_with_failure(tmp_path):
    a, b = tiny("a"), tiny("b")
    trace = {"schema": "etlens.trace", "version": 1, "model": "m", "backend": "xnnpack", "snapshots": [
        {"name": "export", "stage": "aten", "index": 0, "wall_time_s": 0.01, "graph": a.to_json(),
         "diff": {"added": [], "removed": [], "rewritten": [], "replaced": []}, "nodes_delta": 0, "error": None},
        {"name": "bad_pass", "stage": "edge", "index": 1, "wall_time_s": 0.02, "graph": b.to_json(),
         "diff": {"added": [], "removed": [], "rewritten": ["relu"], "replaced": []}, "nodes_delta": 0,
         "error": {"type": "RuntimeError", "message": "boom", "traceback": "Traceback ...\nRuntimeError: boom"}}]}
    data = _data(open(generate_multi_pass_html(trace, tmp_path / "p.html"), encoding="utf-8").read())
    snaps = data["graphs"][0]["snapshots"]
    assert data["mode"] == "passes" and len(snaps) == 2
    err = snaps[1]["error"]
    assert [data["strings"][err[k]] for k in ("type", "message")] == ["RuntimeError", "boom"]
    assert len(snaps[1]["rewritten"]) == 1
    assert data["title"] == "m · xnnpack"
    # the first snapshot is shown plain (nothing to differ from)
    assert snaps[0]["added"] == [] and snaps[0]["rewritten"] == []
    # the tracer's Trace object (and the reader's artifact) give the same page
    from etlens.model.trace import Trace

    obj = Trace.from_json(trace)
    data2 = _data(open(generate_multi_pass_html(obj, tmp_path / "p2.html"), encoding="utf-8").read())
    assert len(data2["graphs"][0]["snapshots"]) == 2 and data2["title"] == "m · xnnpack"


def test_bad_inputs_raise_etlens_errors(tmp_path):
    with pytest.raises(EtlensError):
        generate_html(42, tmp_path / "x.html")
    with pytest.raises(EtlensError):
        generate_multi_pass_html([], tmp_path / "x.html")
    with pytest.raises(EtlensError):
        generate_html(tiny(), tmp_path / "no" / "such" / "dir.html")


def test_compare_has_lineage_matches(tmp_path):
    data = _data(open(generate_compare_html({"aten": tiny(), "lowered": lowered()}, tmp_path / "c.html"),
                      encoding="utf-8").read())
    assert data["mode"] == "compare" and len(data["graphs"]) == 2
    flat = data["matches"]["0,1"]
    ids0 = [data["strings"][i] for i in data["graphs"][0]["nodes"]["name"]]
    ids1 = [data["strings"][i] for i in data["graphs"][1]["nodes"]["name"]]
    pairs = {}
    k = 0
    while k < len(flat):
        pairs[ids0[flat[k]]] = [ids1[j] for j in flat[k + 2:k + 2 + flat[k + 1]]]
        k += 2 + flat[k + 1]
    assert pairs["linear"][-1] == "call_delegate"  # by lineage root, not by name
    # and back: the delegate answers for the ATen node it absorbed (lineage points one way only)
    flat = data["matches"]["1,0"]
    back = {}
    k = 0
    while k < len(flat):
        back[ids1[flat[k]]] = [ids0[j] for j in flat[k + 2:k + 2 + flat[k + 1]]]
        k += 2 + flat[k + 1]
    assert "linear" in back["call_delegate"]


def test_cli_view_graph_json_and_errors(tmp_path, capsys):
    src = tmp_path / "g.json"
    src.write_text(json.dumps(tiny().to_json()))
    out = tmp_path / "g.html"
    assert main(["view", str(src), "-o", str(out)]) == 0
    assert out.exists() and "etlens-data" in out.read_text()
    assert main(["view", str(tmp_path / "missing.pte")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["view", str(src), "--stage", "nope", "-o", str(out)]) == 1


def test_extractors_on_committed_files(committed, tmp_path):
    from etlens.compat import extract_from_etrecord, extract_from_pte

    case = committed["mlp_xnnpack"]
    g = extract_from_pte(case.pte)
    assert isinstance(g, Graph) and g.delegates()
    assert generate_html(g, tmp_path / "pte.html")
    e = extract_from_etrecord(case.etrecord)
    assert isinstance(e, Graph) and len(e) > 0
    with pytest.raises(EtlensError, match="no stage"):
        extract_from_etrecord(case.etrecord, stage="nope")


def test_exported_program_and_edge_manager(tmp_path):
    import torch

    from etlens.demos import get_demo
    from etlens.compat import extract_from_exported_program, visualize_edge_manager

    model, inputs = get_demo("mlp")
    ep = torch.export.export(model, inputs)
    g = extract_from_exported_program(ep)
    assert any(n.target and "linear" in n.target for n in g)

    class FakeEdgeManager:  # the one method visualize_edge_manager needs
        def exported_program(self, method="forward"):
            return ep

    out = visualize_edge_manager(FakeEdgeManager(), tmp_path / "edge.html")
    assert "etlens-data" in open(out, encoding="utf-8").read()
    with pytest.raises(EtlensError):
        visualize_edge_manager(object(), tmp_path / "bad.html")


def test_cli_view_trace_and_stages(tmp_path, capsys):
    a, b = tiny("a"), tiny("b")
    trace = {"schema": "etlens.trace", "version": 1, "model": "m", "backend": "aten", "snapshots": [
        {"name": n, "stage": n, "index": i, "wall_time_s": 0.01, "graph": g.to_json(),
         "diff": {"added": [], "removed": [], "rewritten": [], "replaced": []}, "nodes_delta": 0, "error": None}
        for i, (n, g) in enumerate((("export", a), ("edge", b)))]}
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(trace))
    out = tmp_path / "t.html"
    assert main(["view", str(src), "-o", str(out)]) == 0
    assert "2 passes" in capsys.readouterr().out
    assert _data(out.read_text())["mode"] == "passes"
    # --stage picks one snapshot graph; --steps/compare for several stages
    assert main(["view", str(src), "--stage", "edge", "-o", str(out)]) == 0
    assert _data(out.read_text())["mode"] == "single"
