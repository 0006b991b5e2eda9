"""First divergent layer on the float Llama with planted faults, fp32 and 8da4w (torchao, as export_llama does).

The corpus builder's ``fault_of(seed)`` draws the layer, the weight and the factor; the model runs eagerly
(``etlens.analysis.llm_diff.eager``) with forward hooks on the module paths a build's ETRecord uses.
"""

from __future__ import annotations

import random

import pytest

from tests.conftest import HAS_EXECUTORCH

pytestmark = [pytest.mark.skipif(not HAS_EXECUTORCH, reason="needs ExecuTorch's Llama definition")]


def _q8(model):
    import torch
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)),
              filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and fqn != "output")
    return model


@pytest.mark.slow
def test_planted_layer_found_in_every_seed_and_never_later():
    found = _planted(range(10))
    assert min(found.values()) >= 9, found


def test_planted_layer_found_for_one_seed():
    """The fast case: fault seed 0 (layer, weight and factor drawn by the corpus builder) named exactly."""
    assert _planted([0]) == {"fp32": 1, "q8": 1, "fp32 vs q8": 1}


def _planted(seeds):
    from etlens.analysis.llm_diff.eager import run_eager
    from etlens.analysis.llm_diff.kv import compare_kv
    from etlens.analysis.llm_diff.layers import compare_layers
    from tests.llm_diff.build import PARAMS, base_state_dict, disturbed, fault_of

    rng = random.Random(1)
    tokens = [rng.randrange(1, PARAMS["vocab_size"]) for _ in range(64)]
    base = base_state_dict()
    fp32 = run_eager(None, PARAMS, tokens, state=base)
    q8 = run_eager(None, PARAMS, tokens, state=base, transform=_q8)
    assert compare_layers(fp32.activations, q8.activations, fp32.order).first_divergent is None
    found = {"fp32": 0, "q8": 0, "fp32 vs q8": 0}
    for seed in seeds:
        f = fault_of(seed)
        nf = run_eager(None, PARAMS, tokens, state=disturbed(base, f))
        nq = run_eager(None, PARAMS, tokens, state=disturbed(base, f), transform=_q8)
        for name, (a, b) in {"fp32": (fp32, nf), "q8": (q8, nq), "fp32 vs q8": (fp32, nq)}.items():
            t = compare_layers(a.activations, b.activations, fp32.order)
            assert t.first_divergent_layer_index is not None and t.first_divergent_layer_index <= f["layer"], (name, f)
            found[name] += t.first_divergent_layer_index == f["layer"]
        # the KV caches: bit-identical below the faulty layer; in it too unless the fault is in wk / wv
        # (no fault weight here is), so the first layer whose cached rows differ is the next one
        kv = compare_kv(fp32.activations, nf.activations)
        assert kv.layers == [0, 1, 2, 3]
        assert all(kv.k_mean[i] == 0 and kv.v_mean[i] == 0 for i in range(f["layer"] + 1)), (f, kv.k_mean)
        assert (kv.first_nonzero or {}).get("layer") == (f["layer"] + 1 if f["layer"] < 3 else None), f
    return found
