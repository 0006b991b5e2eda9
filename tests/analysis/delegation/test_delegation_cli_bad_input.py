"""CLI (`etlens delegation`, `etlens model-explorer`) and bad input: no delegates, no edge program,
unknown backend ids, corrupt files, wrong objects - a clear statement, never a crash or an empty
table that looks like a result. Uses the committed artifacts (no ExecuTorch needed)."""

from __future__ import annotations

import json
import zipfile

import pytest

from etlens.analysis.delegation import get_delegation_info
from etlens.cli.main import main
from etlens.errors import EtlensError, MissingDataError, UnsupportedFormatError
from etlens.model import DelegateInfo, Graph, Node


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _rewrite_etrecord(src: str, dst, drop=(), replace=None) -> str:
    replace = replace or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if any(info.filename.startswith(d) for d in drop):
                continue
            data = zin.read(info.filename)
            if info.filename in replace:
                data = replace[info.filename](data)
            zout.writestr(info.filename, data)
    return str(dst)


def test_cli_table_from_etrecord(committed, capsys):
    code, out, err = _run(capsys, "delegation", committed["mlp_xnnpack"].etrecord)
    assert code == 0, err
    assert out.startswith("Total delegated subgraphs: 1\nNumber of delegated nodes: 4\n"
                          "Number of non-delegated nodes: 1\n")
    assert "aten_linear_default" in out and "XnnpackBackend: 1 subgraph(s), 4 node(s)" in out


def test_cli_json_from_etrecord_and_pte(committed, capsys):
    code, out, _ = _run(capsys, "delegation", committed["mlp_xnnpack"].etrecord, "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert (data["num_delegated_subgraphs"], data["num_delegated_nodes"], data["num_non_delegated_nodes"]) == (1, 4, 1)
    ops = {r["op_type"]: r for r in data["operators"]}
    assert ops["aten_linear_default"]["occurrences_in_delegated_graphs"] == 2
    assert ops["getitem"]["occurrences_in_non_delegated_graphs"] == 1
    assert data["delegated"] is True

    code, out, _ = _run(capsys, "delegation", committed["mlp_xnnpack"].pte, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["num_delegated_subgraphs"] == 1
    # the backend's own operation names (the reader may spell them XNNFullyConnected or FullyConnected)
    assert sorted(r["op_type"].removeprefix("XNN") for r in data["operators"]) == ["Add", "FullyConnected"]
    assert any("from a .pte" in n for n in data["notes"])


def test_cli_graph_flag_expands_delegates(committed, capsys):
    code, out, _ = _run(capsys, "delegation", committed["mlp_xnnpack"].etrecord, "--graph")
    assert code == 0 and "backend_id: XnnpackBackend" in out and "lowered graph():" in out


def test_no_delegates_is_said_plainly(committed, capsys):
    for path in (committed["mlp_portable"].pte, committed["mlp_xnnpack"].pt2):
        code, out, _ = _run(capsys, "delegation", path)
        assert code == 0
        assert out.startswith(f"No delegates in {path}: nothing was lowered to a backend")
        code, out, _ = _run(capsys, "delegation", path, "--format", "json")
        data = json.loads(out)
        assert data["delegated"] is False and data["num_delegated_subgraphs"] == 0 and "No delegates" in data["message"]
    info = get_delegation_info(committed["mlp_xnnpack"].pt2)
    assert any("never contains delegates" in n for n in info.notes)


def test_recorded_view_flag(committed, capsys):
    code, out, _ = _run(capsys, "delegation", committed["mlp_xnnpack"].etrecord, "--recorded", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["num_delegated_subgraphs"] == 0 and data["num_non_delegated_nodes"] == 4


def test_etrecord_without_edge_program(committed, tmp_path, capsys):
    path = _rewrite_etrecord(committed["mlp_xnnpack"].etrecord, tmp_path / "no_edge.etrecord",
                             drop=("edge_dialect_exported_program",))
    with pytest.raises(MissingDataError, match="has no edge program"):
        get_delegation_info(path)
    code, _, err = _run(capsys, "delegation", path)
    assert code == 1 and err.startswith("etlens: error:") and "no edge program" in err


def test_etrecord_without_maps_counts_recorded_program_and_says_why(committed, tmp_path):
    path = _rewrite_etrecord(committed["mlp_xnnpack"].etrecord, tmp_path / "no_maps.etrecord",
                             drop=("debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map"))
    info = get_delegation_info(path)
    assert info.num_delegated_subgraphs == 0
    assert any("cannot be rebuilt" in n for n in info.notes)


def test_unknown_backend_id_is_named(committed, tmp_path, capsys):
    path = _rewrite_etrecord(
        committed["mlp_xnnpack"].etrecord, tmp_path / "mystery.etrecord",
        replace={"delegate_map": lambda b: b.replace(b"XnnpackBackend", b"MysteryBackend")})
    info = get_delegation_info(path)
    assert info.num_delegated_subgraphs == 1 and "MysteryBackend" in info.backends
    assert any("unknown backend id 'MysteryBackend'" in n for n in info.notes)
    code, out, _ = _run(capsys, "delegation", path)
    assert code == 0 and "unknown backend id 'MysteryBackend'" in out

    # a .pte whose delegate names a backend etlens cannot decode: counted, contents said unknown
    data = open(committed["mlp_xnnpack"].pte, "rb").read()
    pte = tmp_path / "mystery.pte"
    pte.write_bytes(data.replace(b"XnnpackBackend", b"MysteryBackend"))
    info = get_delegation_info(str(pte))
    assert info.num_delegated_subgraphs == 1
    assert any("MysteryBackend" in n for n in info.notes)


def test_opaque_delegate_graph_is_not_an_empty_result():
    g = Graph("g")
    g.add(Node("x", kind="input"))
    g.add(Node("d", kind="delegate", target="executorch_call_delegate", inputs=["x"],
               delegate=DelegateInfo(backend_id="XnnpackBackend", index=0)))
    g.add(Node("output", kind="output", inputs=["d"]))
    info = get_delegation_info(g)
    assert info.num_delegated_subgraphs == 1 and info.num_delegated_nodes == 0
    assert any("no readable contents" in n for n in info.notes)
    assert "no readable contents" in info.format_report()


def test_corrupt_wrong_and_missing_inputs(committed, tmp_path, capsys):
    bad = tmp_path / "truncated.pte"
    bad.write_bytes(open(committed["mlp_xnnpack"].pte, "rb").read()[:200])
    code, _, err = _run(capsys, "delegation", str(bad))
    assert code == 1 and err.startswith("etlens: error:") and "internal error" not in err
    code, _, err = _run(capsys, "delegation", str(tmp_path / "missing.pte"))
    assert code == 1 and "no such file" in err
    with pytest.raises(UnsupportedFormatError, match="ETDump holds runtime events"):
        get_delegation_info(committed["mlp_xnnpack"].etdump)
    with pytest.raises(UnsupportedFormatError, match="cannot read a builtins.int"):
        get_delegation_info(42)
    with pytest.raises(MissingDataError, match="no method 'backward'"):
        get_delegation_info(committed["mlp_xnnpack"].pte, method="backward")
    with pytest.raises(EtlensError, match="etrecord_view"):
        get_delegation_info(committed["mlp_xnnpack"].pte, etrecord_view="nope")


def test_cli_model_explorer_writes_graph_style_and_node_data(committed, tmp_path, capsys):
    lat = tmp_path / "lat.json"
    lat.write_text(json.dumps({"aten_linear_default": 0.25, "aten_add_tensor": 1.0}))
    out = tmp_path / "graph.json"
    code, stdout, err = _run(capsys, "model-explorer", committed["mlp_xnnpack"].etrecord, "-o", str(out),
                             "--clusters", "--node-data", f"latency={lat}")
    assert code == 0, err
    coll = json.loads(out.read_text())
    assert coll["label"] == "mlp_xnnpack.etrecord" and len(coll["graphs"]) == 1
    ns = {n["id"]: n["namespace"] for n in coll["graphs"][0]["nodes"]}
    assert ns["aten_linear_default"] == ns["aten_add_tensor"] == "partition 0 (XnnpackBackend #0)"
    style = json.loads((tmp_path / "graph.style.json").read_text())
    assert len(style) == 2
    nd = json.loads((tmp_path / "graph.latency.nodedata.json").read_text())
    (gdata,) = nd.values()
    assert gdata["results"]["aten_add_tensor"] == {"value": 1.0}
    assert "wrote" in stdout and str(out) in stdout


def test_cli_model_explorer_bad_node_data(committed, tmp_path, capsys):
    out = tmp_path / "graph.json"
    code, _, err = _run(capsys, "model-explorer", committed["mlp_xnnpack"].pte, "-o", str(out), "--node-data", "oops")
    assert code == 1 and "expected NAME=PATH" in err
    junk = tmp_path / "junk.json"
    junk.write_text(json.dumps({"nobody": 1}))
    code, _, err = _run(capsys, "model-explorer", committed["mlp_xnnpack"].pte, "-o", str(out),
                        "--node-data", f"lat={junk}")
    assert code == 1 and "none of its keys" in err


def test_graph_json_round_trip_gives_the_same_numbers(committed, tmp_path, capsys):
    # the lowered view as etlens graph JSON (what pass traces and the viewer store) reads back the same
    from etlens.analysis.delegation import delegation_graph

    g = delegation_graph(committed["mlp_xnnpack"].etrecord)
    path = tmp_path / "lowered.json"
    path.write_text(json.dumps(g.to_json()))
    code, out, err = _run(capsys, "delegation", str(path), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["num_delegated_subgraphs"], data["num_delegated_nodes"], data["num_non_delegated_nodes"]) == (1, 4, 1)
