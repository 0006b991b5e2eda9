"""Numerics inside the Ethos-U subgraph: the delegated TOSA graph in the TOSA reference model, per ATen node."""

from __future__ import annotations

import numpy as np
import pytest

from etlens.backends.ethosu.tosa_values import parse_dump, tosa_inside_values
from etlens.errors import EtlensError


def _float_program():
    import torch

    from tests.ethosu.models import build_cnn

    model, inputs = build_cnn()
    return torch.export.export(model, inputs), inputs


def _plant(src: str, dst: str, tensor: str) -> None:
    """Flip the sign of output channel 3 of an int8 weight tensor inside a serialized TOSA graph."""
    from tosa.TosaGraph import TosaGraph

    buf = bytearray(open(src, "rb").read())
    block = TosaGraph.GetRootAsTosaGraph(buf, 0).Regions(0).Blocks(0)
    for i in range(block.TensorsLength()):
        t = block.Tensors(i)
        if t.Name().decode() == tensor:
            data = t.DataAsNumpy().tobytes()
            shape = [t.Shape(j) for j in range(t.ShapeLength())]
            off = bytes(buf).index(data)
            w = np.frombuffer(data, dtype=np.int8).reshape(shape).copy()
            w[3] = -w[3]
            buf[off:off + len(data)] = w.tobytes()
            break
    else:
        raise AssertionError(f"no tensor {tensor}")
    open(dst, "wb").write(bytes(buf))


def test_tosa_matches_the_pt2e_reference_and_a_planted_fault_is_found(ethosu_small, tmp_path):
    fp, inputs = _float_program()
    for case in ethosu_small.values():
        res = tosa_inside_values(case.etrecord, inputs=inputs, float_program=fp)
        rows = {r.node: r for r in res.rows}
        assert {"aten_convolution_default", "aten_convolution_default_1", "aten_linear_default"} <= set(rows)
        # the reference model computes the same int8 codes pt2e simulated (bit-exact here) ...
        assert all(r.max_abs_lsb <= res.threshold_lsb and not r.flagged for r in res.rows), res.to_text()
        # ... and int8 tracks float closely where the two are comparable (conv+relu, linear)
        assert rows["aten_convolution_default"].float_node == "relu"
        assert rows["aten_convolution_default"].float_snr_db > 25
        assert rows["aten_linear_default"].float_snr_db > 25
        assert res.first_flagged is None
    # an int8 fault planted in conv c2's weights inside the NPU subgraph: found at c2, not before
    case = ethosu_small["cnn@ethos-u55-128"]
    sidecar_tosa = case.etrecord.replace(".etrecord", ".ethosu0.tosa")
    bad = str(tmp_path / "planted.tosa")
    _plant(sidecar_tosa, bad, "aten_convolution_default_1_weight_ohwi")
    res = tosa_inside_values(case.etrecord, inputs=inputs, float_program=fp, tosa_override={0: bad})
    first = res.first_flagged
    assert first is not None and first.node == "aten_convolution_default_1" and first.module_path == "c2"
    assert first.max_abs_lsb > 50
    assert not [r for r in res.rows if r.node == "aten_convolution_default"][0].flagged
    doc = res.to_dict()
    assert doc["first_flagged"] == "aten_convolution_default_1" and doc["rows"][0]["tosa_op"] == "RESCALE"


def test_parse_dump():
    text = ("Name: a DType=INT8 isValid=1 Rank=2 Shape=[2, 3, ]\n[[ 1  -2  3 ]\n[ 4  5  -128 ]\n]\n"
            "Name: s DType=SHAPE isValid=1 Rank=1 Shape=[4, ] ShapeValue=[0, 0, 0, 0, ]\n"
            "Name: f DType=FP32 isValid=1 Rank=1 Shape=[2, ]\n[ 0.5  -1.25e+00 ]\nsome log line\n")
    v = parse_dump(text)
    assert v["a"].dtype == np.int8 and v["a"].tolist() == [[1, -2, 3], [4, 5, -128]]
    assert v["f"].tolist() == [0.5, -1.25] and "s" not in v


def test_a_damaged_tosa_graph_is_a_clear_error(ethosu_small, tmp_path):
    case = ethosu_small["cnn@ethos-u55-128"]
    bad = tmp_path / "cut.tosa"
    bad.write_bytes(open(case.etrecord.replace(".etrecord", ".ethosu0.tosa"), "rb").read()[:40])
    with pytest.raises(EtlensError, match="TOSA"):
        tosa_inside_values(case.etrecord, tosa_override={0: str(bad)})
