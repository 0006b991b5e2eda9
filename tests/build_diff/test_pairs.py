"""``etlens diff DIR_A DIR_B`` on real builds of one model with one planted change each (the fast corpus).

``rebuild`` (the same model lowered and run again) must be "same" with no cause; ``offload`` (the
partitioner leaves ``layers.1`` out) must name ``layers.1`` / placement first; ``naive`` (another memory
planning algorithm) the memory plan. The JSON document is the contract held-out checks read; its ratios
are checked against ExecuTorch's own Inspector on the same files.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from etlens.analysis.build_diff import KINDS, diff_builds
from etlens.cli.main import main as cli_main
from tests.build_diff.corpus import PAIRS


@pytest.fixture(scope="module")
def diffs(fast_corpus):
    return {name: diff_builds(fast_corpus / PAIRS[name][0], fast_corpus / name)
            for name in ("rebuild", "offload", "naive")}


@pytest.mark.slow
def test_identical_rebuild_is_same(diffs):
    d = diffs["rebuild"]
    assert d.summary["verdict"] == "same", d.headline
    assert d.causes == []
    assert d.summary["size_ratio"] == 1.0 and d.summary["arena_ratio"] == 1.0
    assert not d.unaligned and {r.how for r in d.rows} == {"exact"}
    assert d.headline.startswith("B is the same as A within noise")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["offload", "naive"])
def test_planted_change_is_top_cause(diffs, name):
    _base, kind, module = PAIRS[name]
    d = diffs[name]
    top = d.causes[0]
    assert (top.module_path, top.kind) == (module, kind), [c.to_json() for c in d.causes]
    assert top.share > 0.5
    assert all(c.kind in KINDS for c in d.causes)
    assert [c.share for c in d.causes] == sorted((c.share for c in d.causes), reverse=True)


@pytest.mark.slow
def test_offload_row_and_headline(diffs):
    d = diffs["offload"]
    row = next(r for r in d.rows if r.module_path == "layers.1" and r.a is not None and r.b is not None)
    assert row.a.placement == "XnnpackBackend" and row.b.placement == "portable"
    assert row.a.ops == ["linear"] and "addmm" in row.b.ops     # one op in A is several in B
    assert row.how == "module"
    assert d.summary["verdict"] == "slower" and d.summary["arena_ratio"] > 1
    assert "layers.1" in d.headline and "portable" in d.headline
    assert d.b.execute_ms and row.b.time_ms.size == len(d.b.execute_ms)


def _execute_ms(directory) -> list[float]:
    """Method::execute of every run, as ExecuTorch's own Inspector reads the ETDump."""
    from executorch.devtools import Inspector as EtInspector

    out = []
    for dump in sorted(directory.glob("*.etdp")):  # model.etdp, model.r1.etdp ...: every round of runs
        ins = EtInspector(etdump_path=str(dump))
        out += [float(x) for b in ins.event_blocks for e in b.events if e.name == "Method::execute"
                for x in e.perf_data.raw]
    return out


def test_cli_json_contract_and_ratios(fast_corpus, tmp_path):
    out = tmp_path / "diff.json"
    a, b = fast_corpus / "base", fast_corpus / "offload"
    assert cli_main(["diff", str(a), str(b), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    s = doc["summary"]
    assert set(s) >= {"time_ratio", "size_ratio", "arena_ratio", "verdict"}
    ea, eb = _execute_ms(a), _execute_ms(b)
    assert s["time_ratio"] == pytest.approx(np.mean(eb) / np.mean(ea), rel=1e-6)
    assert s["size_ratio"] == pytest.approx(b.joinpath("model.pte").stat().st_size
                                            / a.joinpath("model.pte").stat().st_size)
    assert s["arena_ratio"] > 1
    assert [c["share"] for c in doc["causes"]] == sorted((c["share"] for c in doc["causes"]), reverse=True)
    for c in doc["causes"]:
        assert set(c) >= {"module_path", "kind", "share", "explanation"} and c["kind"] in KINDS
    assert doc["causes"][0]["module_path"] == "layers.1" and doc["causes"][0]["kind"] == "placement"
    for r in doc["ops"]:
        assert set(r) >= {"module_path", "op", "a", "b"}
        for side in (r["a"], r["b"]):
            if side is not None:
                assert set(side) >= {"placement", "time_ms", "bytes"}
    assert doc["program"]["plans"], "the .pte structural diff is part of the build diff"


def test_cli_gates(fast_corpus, tmp_path, capsys):
    a = str(fast_corpus / "base")
    o = str(tmp_path / "x.txt")
    assert cli_main(["diff", a, str(fast_corpus / "offload"), "-o", o, "--fail-on-slowdown", "1.05"]) == 3
    assert "layers.1 (placement" in capsys.readouterr().err
    assert cli_main(["diff", a, str(fast_corpus / "offload"), "-o", o, "--fail-on-growth", "1024"]) == 3
    assert cli_main(["diff", a, str(fast_corpus / "rebuild"), "-o", o, "--fail-on-slowdown", "1.05",
                     "--fail-on-growth", "0"]) == 0
    text = (tmp_path / "x.txt").read_text()
    assert "same as A within noise" in text


def test_structural_pte_diff_still_works(fast_corpus, tmp_path):
    out = tmp_path / "pte.json"
    a, b = fast_corpus / "base" / "model.pte", fast_corpus / "naive" / "model.pte"
    assert cli_main(["diff", str(a), str(b), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert "plans" in doc and "summary" not in doc
