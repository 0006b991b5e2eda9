"""Quantizer pattern graphs traced once per process (:mod:`etlens.builder.pattern_cache`).

The cached path must quantize exactly as torchao's own tracer does: the same converted graph (code) and the same
output values on a CNN with batch-norm (the conv + bn patterns match) and an MLP, against a quantization done
with the original, uncached function; a pattern that differs in any closed-over value, input shape or flag is
a different key; what cannot be keyed is traced as before.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import requires_executorch

pytestmark = requires_executorch


def _quantize(model, inputs):
    import torch

    from etlens.builder.quantize import quantize_pt2e

    ep = torch.export.export(model, inputs)
    q = quantize_pt2e(model, inputs, "xnnpack", exported=ep)
    return q.code, q(*inputs)


@pytest.mark.parametrize("kind", ["cnn", "mlp"])
def test_cached_patterns_quantize_exactly_as_the_tracer(kind, monkeypatch):
    import torch

    from etlens.builder import pattern_cache

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fix"))
    from culprits import make_case

    model, inputs, _ = make_case(kind, 3)
    _quantize(model, inputs)  # installs the cache (and fills it)
    import torchao.quantization.pt2e.utils as utils
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as xq

    cached = utils._get_aten_graph_module_for_pattern
    assert getattr(cached, "etlens_pattern_cache", False) and xq._get_aten_graph_module_for_pattern is cached
    original = cached.__wrapped__
    monkeypatch.setattr(utils, "_get_aten_graph_module_for_pattern", original)
    monkeypatch.setattr(xq, "_get_aten_graph_module_for_pattern", original)
    monkeypatch.setattr(pattern_cache, "install", lambda: None)
    ref_code, ref_out = _quantize(model, inputs)
    monkeypatch.undo()

    before = pattern_cache.stats()
    code, out = _quantize(model, inputs)
    after = pattern_cache.stats()
    assert code == ref_code
    assert torch.equal(out, ref_out)
    assert after["reused"] > before["reused"] and after["traced"] == before["traced"]


def test_key_tells_patterns_apart():
    import torch
    import torch.nn.functional as F

    from etlens.builder.pattern_cache import pattern_key

    def make(conv, relu):
        def pattern(x, w):
            y = conv(x, w)
            return F.relu(y) if relu else y

        return pattern

    x2, w2 = torch.randn(1, 1, 3, 3), torch.randn(1, 1, 1, 1)
    k = pattern_key(make(F.conv2d, True), (x2, w2), False, {})
    assert k is not None and k == pattern_key(make(F.conv2d, True), (x2 + 1, w2), False, {})  # values don't count
    assert k != pattern_key(make(F.conv2d, False), (x2, w2), False, {})  # a closed-over flag does
    assert k != pattern_key(make(F.conv1d, True), (x2, w2), False, {})  # the conv function does
    assert k != pattern_key(make(F.conv2d, True), (torch.randn(1, 1, 4, 4), w2), False, {})  # shapes do
    assert k != pattern_key(make(F.conv2d, True), (x2, w2), True, {})  # is_cuda does
    assert pattern_key(make(F.conv2d, True), (x2, 3), False, {}) is None  # a non-tensor input: not cached
    unhashable = [1]
    assert pattern_key(lambda x: x + unhashable[0], (x2,), False, {}) is None  # an unhashable closure value
