"""The doctor on tiny models with one planted problem each (``tests/doctor/planted.py``): the planted
problem must be the top finding with the right module, the stated fix must recover at least half the
estimated win, a clean model gets nothing above ``info``.

Fast: the ceil-mode pool (one build, ~30 CPU-s). Slow: every case, the fixes applied and measured
(about ten builds), ``--verify`` on the int8 culprit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import requires_executorch
from tests.doctor.planted import CASES

pytestmark = requires_executorch

PLANTED = Path(__file__).resolve().parent / "planted.py"


def doctor(tmp: Path, target: str, *extra: str) -> dict:
    from etlens.cli.main import main

    out = tmp / f"{target}.json"
    assert main(["doctor", "--model", f"{PLANTED}:{target}", "--runs", "30", "--no-profile-overhead", *extra,
                 "--format", "json", "-o", str(out)]) == 0
    return json.loads(out.read_text())


def top_hit(doc: dict, rule: str, module: str) -> bool:
    top = [f for f in doc["findings"] if f["severity"] != "info"][:1]
    return bool(top) and top[0]["rule"] == rule and module in top[0]["module_paths"]


@pytest.fixture(scope="module")
def pool_doc(tmp_path_factory) -> dict:
    return doctor(tmp_path_factory.mktemp("pool"), "portable_op")


def test_portable_op_is_top_with_the_partitioners_reason(pool_doc):
    import jsonschema

    from etlens.analysis.doctor import schema

    jsonschema.validate(pool_doc, schema())
    assert top_hit(pool_doc, "portable-op", "pool"), pool_doc["findings"][:2]
    f = pool_doc["findings"][0]
    assert "ceil mode is not supported" in f["evidence"]["partitioner_reason"]
    assert f["estimated_win"]["ms"] > 0 and f["severity"] in ("medium", "high")
    assert f["verify_command"].startswith("etlens doctor --model ")


@pytest.mark.slow
def test_planted_corpus_top_findings_and_fixes(tmp_path):
    """5 --model cases + the dynamic bound (artifacts): >= 5 of 6 top hits; each code fix recovers >= half."""
    from etlens.builder.session import BuildSession
    from tests.doctor import planted

    hits = {}
    docs = {}
    for case, (rule, module, target, extra) in CASES.items():
        docs[case] = doctor(tmp_path, target, *extra)
        if rule is None:
            hits[case] = not [f for f in docs[case]["findings"] if f["severity"] != "info"]
        else:
            hits[case] = top_hit(docs[case], rule, module)
    arts = planted.build_dynamic(str(tmp_path / "dyn"), backend="xnnpack")
    from etlens.cli.main import main

    out = tmp_path / "dyn.json"
    assert main(["doctor", "--etdump", arts.etdump, "--etrecord", arts.etrecord, "--pte", arts.pte,
                 "--format", "json", "-o", str(out)]) == 0
    docs["dynamic_bound"] = json.loads(out.read_text())
    hits["dynamic_bound"] = top_hit(docs["dynamic_bound"], "dynamic-shape-bound", "out")
    assert sum(hits.values()) >= 5, hits
    assert hits["clean"]

    # the stated fixes, applied: ms findings re-measured on the fixed model (medians of 30 runs; on a machine
    # shared with other work one of the three may fall short, so 2 of 3 must recover half the estimate)
    recovered_half = {}
    for case, target in (("portable_op", "portable_op"), ("fragmented", "fragmented"), ("layout_copy", "layout_copy")):
        model, inputs = getattr(planted, target)(fixed=True)
        win = docs[case]["findings"][0]["estimated_win"]["ms"]
        with BuildSession(model, inputs, name=f"{case}_fixed") as s:
            from etlens.analysis.doctor.build import diagnose_session

            after = diagnose_session(s, model_args="", runs=30, skip=("profiling",))
        recovered = docs[case]["latency_ms"] - after.latency_ms
        print(f"{case}: estimated {win:.3f} ms, recovered {recovered:.3f} ms "
              f"({docs[case]['latency_ms']:.3f} -> {after.latency_ms:.3f} ms)")
        recovered_half[case] = recovered >= 0.5 * win
        assert not [f for f in after.findings if f.rule == docs[case]["findings"][0]["rule"]]
    assert sum(recovered_half.values()) >= 2, recovered_half
    # the dynamic bound, fixed at 16: the arena shrinks by at least half the estimated bytes
    fixed = planted.build_dynamic(str(tmp_path / "dyn16"), bound=16, backend="xnnpack")
    from etlens.analysis.memory import analyze_memory
    from etlens.readers.artifacts import ArtifactSet

    before = sum(a.size for a in analyze_memory(ArtifactSet(pte=arts.pte).pte()).methods[0].arenas)
    after_b = sum(a.size for a in analyze_memory(ArtifactSet(pte=fixed.pte).pte()).methods[0].arenas)
    assert before - after_b >= 0.5 * docs["dynamic_bound"]["findings"][0]["estimated_win"]["bytes"]


@pytest.mark.slow
def test_verify_applies_the_keep_float_recipe(tmp_path):
    doc = doctor(tmp_path, "quant_culprit", "--quantize", "--verify")
    f = doc["findings"][0]
    assert f["rule"] == "quant-culprit" and f["module_paths"][0] == "layers.2"
    v = f["verified"]
    assert v["applied"] and v["unit"] == "db"
    assert v["after"] - v["before"] >= 0.5 * f["estimated_win"]["db"], (v, f["estimated_win"])
