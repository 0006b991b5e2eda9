"""pt2e quantization of models that take token ids: integer tensors stay integers; calibration batches."""

from __future__ import annotations

import pytest

from tests.conftest import requires_executorch

pytestmark = requires_executorch


def _token_model():
    import torch

    class Tiny(torch.nn.Module):
        """Token + position embeddings (positions = arange + offset, as GPT-2 computes them), then a linear."""

        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(32, 16)
            self.pos = torch.nn.Embedding(8, 16)
            self.proj = torch.nn.Linear(16, 16)

        def forward(self, ids):
            positions = (torch.arange(ids.shape[1]) + 0).unsqueeze(0)
            return self.proj(self.tok(ids) + self.pos(positions))

    torch.manual_seed(0)
    return Tiny().eval(), (torch.randint(0, 32, (1, 8)),)


def test_token_ids_and_positions_stay_integers():
    import torch

    from etlens.builder.quantize import quantize_pt2e

    model, inputs = _token_model()
    q = quantize_pt2e(model, inputs, "xnnpack")  # failed with "'indices' … got FloatTensor" before
    out = q(*inputs)
    ref = model(*inputs)
    assert out.shape == ref.shape
    assert torch.allclose(out, ref, atol=0.1)  # int8 activations, float embeddings
    for node in q.graph.nodes:
        if node.target is torch.ops.aten.embedding.default:
            idx = node.args[1]
            assert "dequantize" not in str(idx.target), f"{node.name} reads quantized indices"


def test_calibration_takes_several_batches_and_checks_them():
    import torch

    from etlens.errors import EtlensError
    from etlens.builder.quantize import calibration_batches, quantize_pt2e

    model, inputs = _token_model()
    more = [inputs, (torch.randint(0, 32, (1, 8)),), [torch.randint(0, 32, (1, 8))]]
    assert len(calibration_batches(inputs, more)) == 3
    assert calibration_batches(inputs, None) == [inputs]
    quantize_pt2e(model, inputs, "xnnpack", calibration=more)
    with pytest.raises(EtlensError, match="empty"):
        calibration_batches(inputs, [])
    with pytest.raises(EtlensError, match="batch 0 has 2 inputs"):
        calibration_batches(inputs, [(inputs[0], inputs[0])])
