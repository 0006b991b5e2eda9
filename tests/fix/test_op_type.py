"""Op-type candidates of ``etlens fix`` (analysis.fix.search.type_candidate): keep every module of a type.

A 6-layer MLP whose two ``Proj`` layers (an ``nn.Linear`` subclass: their own module type) both emit
a "massive activation" channel the next layer ignores; the four plain ``Linear`` layers are healthy.
The op-type candidate is exactly the two ``Proj`` modules, and keeping them in float with their
consumers (the layers after them, which would quantize the outliers again) takes the simulated
output back near float, where the top-1 with its consumer leaves the other culprit's damage.
PyTorch only (pt2e QDQ graphs), XNNPACK's quantizer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")

from culprits import MLP, _activation_outlier  # noqa: E402


class Proj(torch.nn.Linear):
    """A projection of its own type (as a model's GELU, LayerNorm or attention projection would be)."""


def _model():
    torch.manual_seed(3)
    model = MLP(depth=6).eval()
    for i in (1, 3):
        proj = Proj(32, 32)
        proj.load_state_dict(model.layers[i].state_dict())
        model.layers[i] = proj
        _activation_outlier(proj.weight, proj.bias, model.layers[i + 1].weight, j=4 + i)
    return model, (torch.randn(16, 32, generator=torch.Generator().manual_seed(9)),)


def test_type_candidate_keeps_every_proj():
    from etlens.analysis.fix.search import type_candidate
    from etlens.analysis.numerics.introduced import introduced_errors, snr_db
    from etlens.builder.quantize import quantize_pt2e
    from etlens.analysis.fix.consumers import annotated_module, find_consumers
    from etlens.builder.recipe import recipe_quantizer

    model, inputs = _model()
    ep = torch.export.export(model, inputs)
    ref = ep.module()(*inputs)
    rows = introduced_errors(ep.module(), quantize_pt2e(model, inputs, "xnnpack", exported=ep), inputs)
    ranked = list(dict.fromkeys(r.module_path for r in rows if r.module_path))
    cand = type_candidate(rows, ranked)
    assert cand is not None and cand.op_type == "Proj"
    assert sorted(cand.keep_float) == ["layers.1", "layers.3"]
    def with_consumers(keep):
        gm = annotated_module(ep, recipe_quantizer("xnnpack", keep, exported=ep))
        return keep + list(find_consumers(gm, keep, model))

    snr = {}
    for name, keep in (("int8", []), ("top1", with_consumers(ranked[:1])), ("type", with_consumers(cand.keep_float))):
        q = quantize_pt2e(model, inputs, "xnnpack", exported=ep, quantizer=recipe_quantizer("xnnpack", keep))
        snr[name] = snr_db(q(*inputs), ref)
    assert snr["type"] > 25 and snr["type"] > snr["top1"] + 10 and snr["int8"] < 10, snr
    # a type covering most of the model is not a candidate ("keep the model in float")
    assert type_candidate([r for r in rows if r.module_type == "Linear"], ranked) is None
