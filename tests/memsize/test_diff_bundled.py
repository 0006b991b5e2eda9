"""``etlens diff`` against ExecuTorch's ``diff_pte``; ``.bpte`` reading and ``etlens verify``; allocations."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from etlens.analysis.program_diff import diff_programs
from etlens.cli.main import main
from etlens.cli.options import EXIT_GATE
from etlens.errors import EtlensError
from etlens.readers import read, sniff
from etlens.readers.bpte import read_bpte_bytes


def _reference(a: str, b: str):
    from executorch.devtools.pte_tool.diff_pte import diff_pte

    return diff_pte(open(a, "rb").read(), open(b, "rb").read(), a, b)


_FIELDS = ("operators_only_in_a", "operators_only_in_b", "delegates_only_in_a", "delegates_only_in_b",
           "instruction_count_a", "instruction_count_b", "value_count_a", "value_count_b",
           "non_const_buffer_sizes_a", "non_const_buffer_sizes_b")


def _norm(v):
    return list(v) if isinstance(v, (list, tuple)) else v


def _pairs(artifacts, bundled):
    yield artifacts["mlp_portable"].pte, artifacts["mlp_xnnpack"].pte
    yield artifacts["cnn_xnnpack"].pte, artifacts["cnn_q8_xnnpack"].pte
    yield artifacts["mixed_xnnpack"].pte, artifacts["transformer_portable"].pte
    yield str(bundled / "two.pte"), str(bundled / "two_b.pte")


def test_diff_matches_diff_pte(artifacts, bundled):
    for a, b in _pairs(artifacts, bundled):
        ours = diff_programs(a, b)
        ref = _reference(a, b)
        assert ours["bitwise_equal"] == ref.bitwise_equal
        assert len(ours["plans"]) == len(ref.plan_diffs)
        for mine, theirs in zip(ours["plans"], ref.plan_diffs, strict=True):
            for f in _FIELDS:
                want = getattr(theirs, f)
                got = mine[f]
                assert _norm(got) == _norm(want), (a, b, f)
            # tensors whose data differ: same value indices and the same max/mean abs diff
            ref_data = {td.tensor_a.evalue_index: td for td in theirs.tensor_diffs if td.bytes_differ}
            got_data = {t["evalue_index"]: t for t in mine["tensor_diffs"] if t["bytes_differ"]}
            assert set(got_data) == set(ref_data)
            for k, td in ref_data.items():
                assert got_data[k]["num_differing"] == td.num_differing
                assert got_data[k]["max_abs_diff"] == pytest.approx(td.max_abs_diff, rel=1e-6, abs=1e-12)
                assert got_data[k]["mean_abs_diff"] == pytest.approx(td.mean_abs_diff, rel=1e-6, abs=1e-12)
        assert ours["extra_plans_in_a"] == ref.extra_plans_in_a
        assert ours["extra_plans_in_b"] == ref.extra_plans_in_b
        # diff_pte reads named data from the deserialized Program, which ExecuTorch's deserializer has
        # already emptied into a separate store, so it reports none; ours is a superset of its report
        mine_nd = Counter((d["key"], d["only_in"]) for d in ours["named_data_diffs"])
        assert not (Counter((d.key, d.only_in) for d in ref.named_data_diffs) - mine_nd)
    d = diff_programs(artifacts["mlp_portable"].pte, artifacts["mlp_xnnpack"].pte)
    keys = {nd.key for nd in read(artifacts["mlp_xnnpack"].pte).program.named_data}
    assert {x["key"] for x in d["named_data_diffs"]} == keys and {x["only_in"] for x in d["named_data_diffs"]} == {"B"}


def test_diff_cli_json_and_graph_diff(artifacts, tmp_path):
    a, b = artifacts["mlp_portable"], artifacts["mlp_xnnpack"]
    out = tmp_path / "d.json"
    html = tmp_path / "d.html"
    assert main(["diff", a.pte, b.pte, "--format", "json", "-o", str(out), "--html", str(html)]) == 0
    d = json.loads(out.read_text())
    p = d["plans"][0]
    assert p["delegates_only_in_b"] == ["XnnpackBackend"] and "aten::addmm.out" in p["operators_only_in_a"]
    assert d["memory"][0]["arenas"][0]["size_a"] == 2432 and d["size"]["delta"] == d["size_b"] - d["size_a"]
    assert d["graphs"]["forward"]["added"] and html.exists()
    # two ETRecords: the graph-level diff only
    assert main(["diff", a.etrecord, b.etrecord, "--format", "json", "-o", str(out)]) == 0
    g = json.loads(out.read_text())["graphs"]
    edge = next(v for k, v in g.items() if k.startswith("edge"))
    assert "aten_linear_default" in edge["added"]


def test_bpte_reader_matches_executorch(bundled):
    from executorch.devtools.bundled_program.schema.bundled_program_schema import BundledProgram  # noqa: F401

    path = bundled / "good.bpte"
    assert sniff(path).format == "bpte"
    art = read(path)
    assert [s.method_name for s in art.suites] == ["forward"]
    assert len(art.suites[0].cases) == 3
    case = art.suites[0].cases[0]
    assert [v.describe() for v in case.inputs] == ["float32[2, 8]"]
    assert [v.describe() for v in case.expected_outputs] == ["float32[2, 4]"]
    assert art.program_bytes() == (bundled / "two.pte").read_bytes()
    assert list(art.graphs()) == ["forward"]
    s = art.summary()
    assert s["format"] == "bpte" and s["test_suites"][0]["cases"][2]["expected_outputs"][0]["shape"] == [2, 4]


def test_info_lists_bpte_cases(bundled, capsys):
    assert main(["info", str(bundled / "good.bpte"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["test_suites"][0]["method"] == "forward" and len(doc["test_suites"][0]["cases"]) == 3


def test_verify_good_and_bad(bundled, tmp_path, capsys):
    """One runtime child for bad.bpte: cases 0 and 2 (expected outputs from eager PyTorch) pass, case 1
    (expected output shifted by 1.0) fails and is named; the exit status is EXIT_GATE (3)."""
    out = tmp_path / "v.json"
    assert main(["verify", str(bundled / "bad.bpte"), "--format", "json", "-o", str(out)]) == EXIT_GATE
    doc = json.loads(out.read_text())
    assert [(c["method"], c["index"], c["passed"]) for c in doc["cases"]] == [
        ("forward", 0, True), ("forward", 1, False), ("forward", 2, True)]
    assert doc["cases"][0]["max_abs_diff"] < 1e-4 and doc["cases"][2]["max_abs_diff"] < 1e-4
    assert doc["cases"][1]["max_abs_diff"] == pytest.approx(1.0, abs=1e-4)
    assert "forward[1]" in capsys.readouterr().err


def test_verify_exit_zero_when_all_pass(monkeypatch, bundled, capsys):
    import etlens.analysis.bundled as B

    monkeypatch.setattr(B, "verify_bundled", lambda *a, **k: {"cases": [
        {"method": "forward", "index": 0, "passed": True, "max_abs_diff": 0.0}], "passed": True})
    assert main(["verify", str(bundled / "good.bpte")]) == 0
    assert "1/1 cases passed" in capsys.readouterr().out


def test_compare_outputs_rules():
    import numpy as np

    from etlens.analysis.bundled import compare_outputs

    assert compare_outputs([np.ones(3)], [np.ones(3) + 1e-6], 1e-5, 0)["passed"]
    assert not compare_outputs([np.ones(3)], [np.ones(3) + 1e-3], 1e-5, 0)["passed"]
    assert "shape" in compare_outputs([np.ones(3)], [np.ones(4)], 1, 1)["detail"]
    assert "outputs" in compare_outputs([], [np.ones(4)], 1, 1)["detail"]


@pytest.mark.parametrize("mutate", ["truncate", "program_offset", "tiny"])
def test_bpte_bad_input_is_one_error(bundled, mutate):
    import struct

    data = bytearray((bundled / "good.bpte").read_bytes())
    if mutate == "truncate":
        data = data[: len(data) // 2]
    elif mutate == "tiny":
        data = data[:6]
    else:  # point the root table offset outside the file
        struct.pack_into("<I", data, 0, len(data) + 1000)
    with pytest.raises(EtlensError):
        read_bpte_bytes(bytes(data), "bad.bpte")


def test_allocations_from_executorch_written_etdump(tmp_path, capsys):
    from executorch.devtools.etdump.schema_flatcc import (AllocationEvent, Allocator, ETDumpFlatCC, Event,
                                                          ProfileEvent, RunData)
    from executorch.devtools.etdump.serialize import serialize_to_etdump_flatcc

    def pe(name, t0, t1):
        return Event(ProfileEvent(name, 0, -1, -1, None, None, t0, t1), None, None)

    def ae(a, s):
        return Event(None, AllocationEvent(a, s), None)

    run = RunData("Execute", -1, [Allocator("method_allocator"), Allocator("temp_allocator")],
                  [pe("Program::load_method", 0, 10), ae(1, 4096), ae(1, 128), pe("DELEGATE_CALL", 20, 30),
                   ae(2, 65536), ae(1, 64)])
    path = tmp_path / "alloc.etdp"
    path.write_bytes(serialize_to_etdump_flatcc(ETDumpFlatCC(0, [run])))
    assert main(["inspect", "--etdump", str(path), "--allocations", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    r = doc["runs"][0]
    assert [(a["name"], a["count"], a["bytes"]) for a in r["allocators"]] == [
        ("method_allocator", 3, 4288), ("temp_allocator", 1, 65536)]
    assert r["largest"][0] == {"event": 4, "allocator": "temp_allocator", "allocator_id": 2, "bytes": 65536,
                               "during": "DELEGATE_CALL"}
    assert [t["cumulative_bytes"] for t in r["timeline"]] == [4096, 4224, 65536, 4288]
    from etlens.report.memory_section import memory_sections
    from types import SimpleNamespace

    secs = memory_sections(SimpleNamespace(pte=None, etdump=str(path)), str(tmp_path), "r", {})
    assert [s.id for s in secs] == ["allocations"] and "temp_allocator" in secs[0].body
