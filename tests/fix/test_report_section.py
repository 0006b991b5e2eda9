"""The report's "Culprits" section (report/fix_section.py) on the 6-layer activation-culprit MLP.

PyTorch only (the build's own float and quantized modules; no lowering): the section ranks
``layers.2`` first by introduced error while the accumulated error at it is tiny, suggests it as
the recipe, and the summary card names it; a float build gets no section. The page with the
overlay was checked in headless Chromium while building it (docs/fix.md); the slow end-to-end test
of ``etlens report --quantize`` is tests/fix/test_fix_cli.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")

from culprits import make_case  # noqa: E402


def test_culprits_section_ranks_by_introduced(tmp_path):
    from etlens.builder.session import BuildSession
    from etlens.report.fix_section import card, compute, section

    model, inputs, culprits = make_case("mlp_act", 0)
    with BuildSession(model, inputs, backend="xnnpack", quantize=True) as session:
        res = compute(session)
    assert res.rows[0].module_path == culprits[0] and res.suggestion == culprits
    assert res.suggestion_share > 0.9  # measured 98%
    assert res.int8_snr_db < 10  # measured 2.2 dB
    top, nxt = res.rows[0], res.rows[1]
    assert top.accumulated < nxt.accumulated  # the gap table would point after the culprit
    data = SimpleNamespace(introduced=res, reference_graph=None)
    sec = section(data, str(tmp_path), "r", {})
    assert sec.id == "culprits" and "culprits-table" in sec.body
    assert '{"keep_float": ["layers.2"]}' in sec.body.replace("&quot;", '"')
    first_row = sec.body.split("<tbody>")[1].split("</tr>")[0]
    assert "layers.2" in first_row and "class='bad'" in first_row
    assert card(data).value == "layers.2"
    with BuildSession(model, inputs, backend="xnnpack", quantize=False) as float_session:
        assert compute(float_session) is None
    assert section(SimpleNamespace(introduced=None, reference_graph=None), str(tmp_path), "r", {}) is None


def test_no_suggestion_when_no_op_dominates(tmp_path):
    from etlens.analysis.numerics.introduced import ClusterError
    from etlens.report.fix_section import Introduced, card, section

    rows = [ClusterError(rank=i + 1, module_path=f"layers.{i}", module_type="Linear", op="linear.default",
                         nodes=[f"linear_{i}"], introduced=1e-4 / (i + 1), introduced_local=1e-5, accumulated=1e-4,
                         introduced_snr_db=40.0, accumulated_snr_db=40.0) for i in range(3)]
    res = Introduced(rows=rows, backend="xnnpack", int8_snr_db=32.0, applied=["layers.9"],
                     suggestion_share=0.55)  # what compute() leaves after a recipe removed the culprit
    data = SimpleNamespace(introduced=res, reference_graph=None)
    body = section(data, str(tmp_path), "r", {}).body
    assert "no single op dominates" in body and "keep_float" not in body and "layers.9" in body
    assert card(data).value == "none dominates"
