"""Per-op values inside delegates: injected faults are found, the corpus gets rows, tap_compare agrees."""

from __future__ import annotations

import pytest

from .conftest import CORPUS, FAST_FAULT, FAULTS

#: one xdist worker builds the cases (two child processes) and runs these tests; the other worker goes on
#: with other tests instead of waiting on the build's file lock
pytestmark = pytest.mark.xdist_group("inside")


@pytest.mark.parametrize("case", [pytest.param(c, marks=[] if c == FAST_FAULT else pytest.mark.slow) for c in FAULTS])
def test_injected_fault_is_first_divergence(request, case):
    doc = request.getfixturevalue("inside_faults" if case == FAST_FAULT else "inside_docs")[case]
    assert "error" not in doc, doc["error"]
    fd = doc["first_divergence"]
    assert fd is not None, f"{case}: no value crosses SNR 10 dB"
    assert fd["module_path"] == doc["expected_module"], (case, fd)
    assert fd["inside_delegate"] and fd["backend"] == "XnnpackBackend"
    assert fd["reference_kind"] == "float"
    # every row before it is healthy, and the model is fully delegated
    rows = doc["rows"]
    assert all(not r["crosses_threshold"] for r in rows[:fd["row"]])
    # fully delegated: every op runs inside XNNPACK (the getitems of an unbind are views the
    # partitioner leaves outside; their rows say so)
    assert all(r["inside_delegate"] for r in rows if not all(op.startswith("getitem") for op in r["aot_ops"]))
    assert fd["source_line"] and "faults.py" in fd["source_line"]


@pytest.mark.slow
@pytest.mark.parametrize("model,variant", CORPUS)
def test_corpus_rows_inside_delegates(inside_docs, model, variant):
    doc = inside_docs[f"{model}_{variant}"]
    # the shared pt2e step leaves integer inputs (token ids) alone (passes/quantize.integer_safe)
    assert "error" not in doc, doc.get("error")
    inside = [r for r in doc["rows"] if r["inside_delegate"]]
    # every value that could not be exposed is listed with the backend's reason, never dropped silently
    assert all(u["error"] for u in doc["method"].get("unexposed", []))
    # values XNNPACK refuses ("Output node … is already in the inputs": a value that passes straight
    # through a partition) are mapped exactly to their exposure and dropped; most ops stay exposed
    assert len(inside) >= 5, (model, variant, len(inside))
    assert len(doc["method"]["unexposed"]) <= max(2, len(doc["rows"]) // 5), doc["method"]["unexposed"]
    for r in inside:
        assert r["backend"] == "XnnpackBackend"
        assert r["aot_ops"] and r["debug_handles"]
        assert r["reference_kind"] == "float"
        assert set(r["metrics"]["float"]) >= {"MSE", "L1", "SNR", "cosine", "max_abs"}
        if variant == "int8":
            assert "qdq_simulated" in r["metrics"]
    # the backend's fp32 kernels agree with torch to float rounding; int8 values are mostly close to
    # float (single rows may vanish: ConvNeXt's layer scale of 1e-6 is below one int8 step, SNR 0 dB)
    # (values of ~1e-45 are denormals XNNPACK flushes to zero: SNR 0 dB, max_abs 1e-45 — not a drift)
    snrs = sorted(r["gap"] for r in inside if isinstance(r["gap"], (int, float))
                  and r["metrics"]["float"]["max_abs"] > 1e-30)
    assert snrs, (model, variant)
    if variant == "fp32":
        assert snrs[0] > 40, (model, snrs[0])
    else:
        assert snrs[len(snrs) // 2] > 10, (model, snrs)
    assert doc["method"]["name"] == "instrumented-outputs"


def test_json_names(inside_faults):
    doc = inside_faults["fault_mlp"]
    assert {"metric", "threshold", "rows", "first_divergence", "observer_effect", "method"} <= set(doc)
    row = doc["rows"][0]
    assert {"aot_ops", "debug_handles", "module_path", "inside_delegate", "backend", "gap",
            "reference_kind"} <= set(row)
    assert {"node", "module_path", "gap", "source_line"} <= set(doc["first_divergence"])


@pytest.mark.slow
def test_same_values_as_tap_compare(inside_docs):
    """Where upstream's tap works (ConvNeXt), the backend's values match its runtime statistics."""
    ours = {r["node"]: r for r in inside_docs["convnext_fp32"]["rows"] if r["inside_delegate"]}
    theirs = {r["node_name"]: r for r in inside_docs["tap_convnext"]["rows"]}
    common = sorted(set(ours) & set(theirs))
    assert len(common) >= 10, (len(common), sorted(ours)[:5], sorted(theirs)[:5])
    for name in common:
        for stat in ("min", "max", "mean", "abs_max"):
            mine, tap = ours[name]["stats"][stat], theirs[name][f"rt_{stat}"]
            assert mine == pytest.approx(tap, rel=1e-4, abs=1e-5), (name, stat, mine, tap)
