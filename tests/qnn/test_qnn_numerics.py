"""Numerics inside QNN: per-op outputs of the HTP simulator against the reference, first divergence named."""

from __future__ import annotations

import pytest

from .conftest import run_json

#: one worker builds the corpus while the other goes on (``--dist loadgroup``), instead of waiting on its lock
pytestmark = pytest.mark.xdist_group("qnn")


def _gap(corpus, case, tmp_path, *extra):
    return run_json(["gap", "--etdump", str(corpus / f"{case}.etdp"), "--etrecord", str(corpus / f"{case}.etrecord"),
                     "--debug-buffer", str(corpus / f"{case}.bin"), *extra], tmp_path / f"{case}.gap.json")


def test_planted_int8_fault_is_the_first_divergence(qnn_corpus, manifest, tmp_path):
    code, doc = _gap(qnn_corpus, "fault_int8", tmp_path)
    assert code == 0
    first = doc["first_divergence"]
    assert first["node"] == manifest["fault_node"] and first["inside_delegate"] is True
    assert first["module_path"] == "conv2"
    inside = [r for r in doc["rows"] if r["inside_delegate"]]
    before = inside[:[r["node"] for r in inside].index(manifest["fault_node"])]
    assert before and all(r["snr_db"] > 30 for r in before)   # int8 ops upstream agree with the reference


@pytest.mark.parametrize("case,floor_db", [("dump_int8", 30.0), ("dump_fp16", 55.0)])
def test_healthy_dumps_agree_op_by_op(qnn_corpus, tmp_path, case, floor_db):
    code, doc = _gap(qnn_corpus, case, tmp_path)
    assert code == 0
    inside = [r for r in doc["rows"] if r["inside_delegate"]]
    assert len(inside) >= 7 and doc["first_divergence"] is None
    assert all(r["snr_db"] > floor_db for r in inside)
    convs = [r for r in inside if r["target"] == "aten.convolution.default"]
    assert convs and all(r["layout"] == "NHWC->NCHW" for r in convs)
    if case == "dump_int8":
        assert all(r["runtime_dtype"] == "BYTE" and r["scale"] > 0 for r in inside)


def test_threshold_gates_inside_rows(qnn_corpus, tmp_path):
    code, doc = _gap(qnn_corpus, "fault_int8", tmp_path, "--metric", "SNR", "--fail-on-gap", "20")
    assert code == 3 and doc["crossing"] >= 1
    assert doc["first_divergence"]["node"] == "aten_convolution_default_1"
