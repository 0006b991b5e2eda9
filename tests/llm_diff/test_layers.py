"""etlens.analysis.llm_diff.layers: relative error per module x position and the first divergent layer."""

from __future__ import annotations

import numpy as np
import pytest

from etlens.analysis.llm_diff.layers import compare_layers, layer_index, module_kind, relative_error

ORDER = [p for i in range(4) for p in (f"layers.{i}.attention_norm", f"layers.{i}.attention",
                                       f"layers.{i}.ffn_norm", f"layers.{i}.feed_forward", f"layers.{i}")]


def _acts(rng, n=16, d=32):
    return {m: rng.normal(size=(n, d)) for m in ORDER}


def _noisy(acts, rng, level, fault_layer=None, fault=0.0):
    """Every weighted module adds ``level`` relative noise; the residual stream (norm inputs) accumulates it."""
    out, resid = {}, 0.0

    def add(m, rel):
        out[m] = acts[m] + rel * rng.normal(size=acts[m].shape) * np.abs(acts[m]).mean()

    for i in range(4):
        extra = fault if i == fault_layer else 0.0
        add(f"layers.{i}.attention_norm", resid)
        add(f"layers.{i}.attention", np.hypot(level + extra, 2 * resid))
        resid = np.sqrt(resid ** 2 + (level / 3) ** 2 + (extra / 3) ** 2)
        add(f"layers.{i}.ffn_norm", resid)
        add(f"layers.{i}.feed_forward", np.hypot(level, 2 * resid))
        resid = np.sqrt(resid ** 2 + (level / 3) ** 2)
        add(f"layers.{i}", resid)
    return out


def test_names():
    assert layer_index("layers.12.feed_forward") == 12 and layer_index("norm") is None
    assert module_kind("layers.3.attention") == "layers.*.attention"


def test_relative_error_rows():
    a = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, 0.0]])
    b = np.array([[3.0, 4.5], [0.0, 0.0], [1.0, 0.0]])
    assert relative_error(a, b).tolist() == [0.1, 0.0, np.inf]


def test_identical_runs_name_nothing():
    rng = np.random.default_rng(1)
    a = _acts(rng)
    t = compare_layers(a, a, ORDER)
    assert t.first_divergent is None and t.first_nonzero is None and float(t.errors.max()) == 0


@pytest.mark.parametrize("layer", [0, 1, 2, 3])
def test_planted_fault_without_noise(layer):
    rng = np.random.default_rng(layer)
    a = _acts(rng)
    t = compare_layers(a, _noisy(a, rng, 0.0, layer, 1.0), ORDER)
    assert t.first_divergent_layer_index == layer and t.first_divergent == f"layers.{layer}.attention"


@pytest.mark.parametrize("seed", range(10))
def test_planted_fault_above_uniform_quantization_noise(seed):
    rng = np.random.default_rng(100 + seed)
    a = _acts(rng)
    layer = seed % 4
    t = compare_layers(a, _noisy(a, rng, 0.1, layer, 0.6), ORDER)
    assert t.first_divergent_layer_index == layer, (t.mean, t.added)
    assert t.first_nonzero.startswith("layers.0")  # the noise itself starts at layer 0


def test_uniform_noise_alone_names_nothing():
    rng = np.random.default_rng(7)
    a = _acts(rng)
    t = compare_layers(a, _noisy(a, rng, 0.1), ORDER)
    assert t.first_divergent is None and t.noise_floor > 0.01
