"""Layout from the facts, never from shapes: a CNN whose feature maps are square (C = H = W = 16).

An NHWC TOSA tensor there has exactly the shape of its NCHW reference, so a comparison that guesses the
layout from the shape compares transposed values and flags every convolution from the stem on. The dim
order of each TOSA tensor comes from the graph's inputs (the edge program's dim order) through its
TRANSPOSE operators (:func:`etlens.backends.ethosu.tosa_values.tosa_layouts`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from etlens.backends.ethosu.tosa_values import tosa_graph_ops, tosa_inside_values, tosa_layouts
from tests.conftest import build_once
from tests.ethosu.conftest import SOURCES, _has_vela
from tests.ethosu.test_tosa_values import _plant

HERE = Path(__file__).resolve().parent


def test_layouts_follow_the_transposes(ethosu_small):
    """The CNN of the small corpus: its input is NCHW (the edge program's order), one TRANSPOSE makes it
    NHWC, and every tensor after it (convolutions, rescales, reductions) is NHWC; a RESHAPE ends it."""
    case = ethosu_small["cnn@ethos-u55-128"]
    tosa = case.etrecord.replace(".etrecord", ".ethosu0.tosa")
    shapes, ops = tosa_graph_ops(tosa)
    first = next(o for o in ops if o[0] == "TRANSPOSE")
    order = tosa_layouts(tosa, {first[1][0]: (0, 1, 2, 3)})
    assert order[first[2][0]] == (0, 2, 3, 1) and first[3] == (0, 2, 3, 1)
    convs = [o[2][0] for o in ops if o[0] == "CONV2D"]
    assert convs and all(order[c] == (0, 2, 3, 1) for c in convs)
    assert "tosa_reshape_default" not in order  # a reshape: no dim order claimed


@pytest.fixture(scope="module")
def square():
    if not _has_vela():
        pytest.skip("needs the executorch and ethos-u extras (ethos-u-vela)")
    out = build_once("ethosu_square", HERE / "build_square.py", (*SOURCES, HERE / "build_corpus.py"))
    files = json.loads((out / "manifest.json").read_text())["square_cnn@ethos-u55-128"]
    return {k: str(out / v) for k, v in files.items() if isinstance(v, str)}


def _float_program():
    import torch

    from tests.ethosu.build_square import build_square

    model, inputs = build_square()
    return torch.export.export(model, inputs), inputs


@pytest.mark.slow
def test_square_maps_compare_exact_and_the_planted_conv_is_first(square, tmp_path):
    fp, inputs = _float_program()
    res = tosa_inside_values(square["etrecord"], inputs=inputs, float_program=fp, snr_floor_db=15.0)
    convs = [r for r in res.rows if r.node.startswith("aten_convolution")]
    assert len(convs) == 6 and all(r.shape == (1, 16, 16, 16) for r in convs), res.to_text()
    # the stem is exact in any int8 build: compared in the right layout, every conv is bit-exact
    assert all(r.max_abs_lsb <= res.threshold_lsb and not r.flagged for r in res.rows), res.to_text()
    assert res.first_flagged is None
    # an int8 fault planted in the 4th conv's weights (convs.3): flagged there first, nothing before it
    bad = str(tmp_path / "planted.tosa")
    _plant(square["etrecord"].replace(".etrecord", ".ethosu0.tosa"), bad, "aten_convolution_default_3_weight_ohwi")
    res = tosa_inside_values(square["etrecord"], inputs=inputs, float_program=fp, tosa_override={0: bad},
                             snr_floor_db=15.0)
    first = res.first_flagged
    assert first is not None and first.module_path == "convs.3", res.to_text()
    before = res.rows[:res.rows.index(first)]
    assert len(before) >= 3 and not any(r.flagged for r in before), res.to_text()
