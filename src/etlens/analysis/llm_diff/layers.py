"""Per-layer comparison of two LLM runs: relative error per module x position, first divergent layer.

Inputs are the two runs' module outputs, matched by **module path** (``layers.2.feed_forward``),
never by debug handle (an fp32 and an 8da4w graph share no handle numbering): ``{path: [P, ...]}``
arrays, one row per position (the token fed at that step). Where a build gives the output of a
module's last operator it is the module's output; the capture says which operator stands for it.

Relative error of module ``m`` at position ``p``: ``||new - base||_2 / ||base||_2`` over the row.

**First divergent layer.** Two builds of one model differ everywhere a little when one is
quantized (every 8da4w linear adds its noise), so "the first module whose error is not zero" would
always be layer 0. What a planted fault (or a broken layer) looks like instead is a layer that
*adds far more error than the others do*. The residual stream is where that shows: with ``E_i``
the mean relative error of layer ``i``'s output (the block output, ``layers.i``), the error layer
``i`` adds is ``Q_i = sqrt(max(E_i^2 - E_{i-1}^2, 0))`` (independent noise adds in quadrature, so
uniform quantization noise gives about the same ``Q`` in every layer, while error that comes in
from below is not counted again). The noise floor is ``max(abs_floor, median_i Q_i)``; the first
layer with ``Q_i > ratio x floor`` is the first divergent layer (``None`` when none is). Within
that layer the module named is the first of its sub-modules (attention norm, attention, FFN norm,
feed-forward) whose error stands out the same way against the same kind of module in the layers
before; the block itself (``layers.i``) when none does.

Example::

    from etlens.analysis.llm_diff.layers import compare_layers
    table = compare_layers(base_acts, new_acts, order)     # {path: ndarray[P, ...]}
    table.first_divergent, table.errors.shape, table.noise_floor
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["LayerTable", "compare_layers", "relative_error", "layer_index", "module_kind",
           "DEFAULT_RATIO", "DEFAULT_ABS_FLOOR"]

#: a layer departs when the error it adds exceeds this many times the noise floor
DEFAULT_RATIO = 2.0
#: relative error treated as float rounding (two fp32 builds of one model differ by ~1e-6)
DEFAULT_ABS_FLOOR = 1e-3

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")


def layer_index(path: str) -> Optional[int]:
    """``3`` for ``layers.3.attention``; ``None`` for paths outside the layer stack (``norm``, ``output``)."""
    m = _LAYER.search(path)
    return int(m.group(1)) if m else None


def module_kind(path: str) -> str:
    """The path with its layer number taken out (``layers.*.attention``): modules of one kind across layers."""
    return _LAYER.sub(lambda m: m.group(0).replace(m.group(1), "*"), path)


def relative_error(base: Any, new: Any) -> np.ndarray:
    """``||new - base|| / ||base||`` per row (first axis = positions), in float64.

    A zero base row gives 0 when the new row is zero too, else ``inf``; rows with NaN give NaN.
    """
    a = np.asarray(base, dtype=np.float64).reshape(len(base), -1)
    b = np.asarray(new, dtype=np.float64).reshape(len(new), -1)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    num = np.linalg.norm(b - a, axis=1)
    den = np.linalg.norm(a, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, np.inf, 0.0))
    return out


@dataclass
class LayerTable:
    """Relative error per module x position and the verdict.

    ``modules``: paths in execution order; ``errors``: ``[modules, positions]``; ``mean``: per
    module; ``added``: layer -> ``Q_i`` (see the module docstring); ``noise_floor``: the floor the
    verdict used; ``first_divergent``: the module path named (``None``: nothing departs);
    ``first_divergent_layer_index``; ``first_nonzero``: the first module above ``abs_floor`` at all
    (differences that stay within the noise floor still start somewhere); ``ops``: module -> the
    operator whose output stands for it (from the capture, when known).
    """

    modules: list[str]
    errors: np.ndarray
    mean: dict[str, float]
    added: dict[int, float] = field(default_factory=dict)
    noise_floor: float = 0.0
    ratio: float = DEFAULT_RATIO
    first_divergent: Optional[str] = None
    first_divergent_layer_index: Optional[int] = None
    first_nonzero: Optional[str] = None
    ops: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> Any:
            return None if not math.isfinite(x) else float(x)

        return {"modules": list(self.modules), "errors": [[num(v) for v in row] for row in self.errors],
                "mean": {k: num(v) for k, v in self.mean.items()},
                "added_per_layer": {str(k): num(v) for k, v in self.added.items()},
                "noise_floor": num(self.noise_floor), "ratio": self.ratio,
                "first_divergent": self.first_divergent,
                "first_divergent_layer_index": self.first_divergent_layer_index,
                "first_nonzero": self.first_nonzero, "ops": dict(self.ops)}


def _finite_mean(row: np.ndarray) -> float:
    """Mean over the positions both runs logged (NaN = not logged there); ``inf`` if any is unbounded."""
    r = row[~np.isnan(row)]
    if np.isinf(r).any():
        return math.inf
    return float(r.mean()) if r.size else math.nan


def compare_layers(base: dict[str, Any], new: dict[str, Any], order: Sequence[str], *,
                   ratio: float = DEFAULT_RATIO, abs_floor: float = DEFAULT_ABS_FLOOR,
                   ops: Optional[dict[str, str]] = None) -> LayerTable:
    """Relative error of every module both runs have, in ``order``, and the first divergent layer."""
    modules = [m for m in order if m in base and m in new
               and np.asarray(base[m]).reshape(len(base[m]), -1).shape[1:] ==
               np.asarray(new[m]).reshape(len(new[m]), -1).shape[1:]]  # one value per position in both
    n = min((len(base[m]) for m in modules), default=0)
    errors = np.zeros((len(modules), n))
    for i, m in enumerate(modules):
        errors[i] = relative_error(np.asarray(base[m])[:n], np.asarray(new[m])[:n])
    mean = {m: _finite_mean(errors[i]) for i, m in enumerate(modules)}
    table = LayerTable(modules, errors, mean, ratio=ratio, ops=dict(ops or {}))
    table.first_nonzero = next((m for m in modules if not mean[m] <= abs_floor), None)
    _verdict(table, abs_floor)
    return table


#: module kinds whose own error is scored against the same kind in the other layers (they hold the weights)
WEIGHTED_PARTS = ("attention", "feed_forward")


def _block_errors(table: LayerTable) -> dict[int, float]:
    """``E_i``: the block output's (``layers.i``) mean error per layer."""
    per: dict[int, float] = {}
    for m in table.modules:
        i = layer_index(m)
        if i is not None and m.endswith(f"layers.{i}"):
            e = table.mean[m]
            per[i] = e if not math.isnan(e) else math.inf
    return dict(sorted(per.items()))


def _score(values: dict[int, float], i: int, abs_floor: float) -> float:
    """``values[i]`` over the median of the other layers' values (the floor: at least ``abs_floor``)."""
    others = [v for j, v in values.items() if j != i and math.isfinite(v)]
    floor = max(abs_floor, float(np.median(others)) if others else 0.0)
    v = values[i]
    return math.inf if not math.isfinite(v) else v / floor


def _verdict(table: LayerTable, abs_floor: float) -> None:
    """Per layer, each signal scored against the other layers; the first layer where one exceeds ``ratio``."""
    signals: dict[str, dict[int, float]] = {}
    per = _block_errors(table)
    if per:
        prev, added = 0.0, {}
        for i, e in per.items():
            added[i] = math.sqrt(max(e * e - prev * prev, 0.0)) if math.isfinite(e) else math.inf
            prev = e if math.isfinite(e) else prev
        table.added = added
        signals["block"] = added
    for m in table.modules:
        i = layer_index(m)
        if i is not None and any(m.endswith(f"layers.{i}.{part}") for part in WEIGHTED_PARTS):
            signals.setdefault(module_kind(m), {})[i] = table.mean[m] if not math.isnan(table.mean[m]) else math.inf
    layers = sorted({i for s in signals.values() for i in s})
    if not layers:
        return
    finite = [q for q in table.added.values() if math.isfinite(q)]
    table.noise_floor = max(abs_floor, float(np.median(finite)) if finite else 0.0)
    for i in layers:
        hits = {kind: _score(vals, i, abs_floor) for kind, vals in signals.items() if i in vals}
        hits = {k: v for k, v in hits.items() if v > table.ratio}
        if not hits:
            continue
        table.first_divergent_layer_index = i
        parts = [m for m in table.modules if layer_index(m) == i and module_kind(m) in hits]
        if not parts:  # the block stands out: name its weighted part that stands out most, if one does
            scored = [(_score(signals[module_kind(m)], i, abs_floor), m) for m in table.modules
                      if layer_index(m) == i and module_kind(m) in signals]
            parts = [max(scored, key=lambda t: t[0])[1]] if scored and max(scored)[0] > 1.0 else []
        table.first_divergent = parts[0] if parts else _block_path(table, i)
        return


def _block_path(table: LayerTable, k: int) -> str:
    return next((m for m in table.modules if layer_index(m) == k and m.endswith(f"layers.{k}")), f"layers.{k}")
