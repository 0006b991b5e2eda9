"""The KV caches of two LLM runs compared by position: what each layer wrote for every token.

ExecuTorch's KV-cache Llama (``export_llama -kv --use_sdpa_with_kv_cache``) writes each step's key
and value rows into mutable cache buffers with the custom ``llama::update_cache`` op, in place. The
runtime does not log those writes (the op's ``out`` is a placeholder, and kernel *inputs* are never
in the debug buffer), and the pybindings give no access to a method's mutable buffers. What the
debug buffer does log are the two tensors the op copies, as the outputs of the operators that make
them:

* **V**: the ``layers.N.attention.wv`` projection's output, ``[1, T, n_kv_heads * head_dim]``: the
  rows ``update_cache`` copies into the value cache unchanged (a view, not an operator, lies between);
* **K**: the last operator of ``layers.N.attention.rope.apply_rotary_emb``: the keys *after* RoPE
  (the rotation is applied to the queries first, then to the keys, so the module's last output is
  the keys), ``[1, T, n_kv_heads, head_dim/2, 2]`` — the rows copied into the key cache.

With teacher forcing one position per call, slot ``p`` of a cache is written once, by call ``p``,
and read unchanged by every later call, so these rows *are* the caches' contents by position; for a
build without a KV cache they are the keys and values its attention used. A float source (``.pth``)
side is hooked on the same module paths (RoPE's second output, ``wv``'s output). Not covered: a
quantized KV cache (``--quantize_kv_cache``: the stored int8 rows and scales come from a further
operator) and ring-buffer caches (a slot is written more than once).

Per layer, per position: relative error ``||new - base|| / ||base||`` of the K row and of the V row.

Example::

    from etlens.analysis.llm_diff.kv import compare_kv
    kv = compare_kv(base_acts, new_acts)      # {module path: [positions, features]} of both runs
    kv.k[2, 10], kv.v_mean[2], kv.first_nonzero
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .layers import DEFAULT_ABS_FLOOR, relative_error

__all__ = ["KV_KINDS", "KvTable", "compare_kv", "kv_path", "kv_of"]

_SUFFIX = {"k": "attention.rope.apply_rotary_emb", "v": "attention.wv"}
#: module kinds whose output is what a layer writes into its key / value cache (``*`` = layer number)
KV_KINDS = tuple(f"layers.*.{s}" for s in _SUFFIX.values())
_PATH = re.compile(r"layers\.(\d+)\.(attention\.rope\.apply_rotary_emb|attention\.wv)$")


def kv_path(layer: int, which: str) -> str:
    """``layers.2.attention.wv`` for ``(2, "v")``: the module whose output is layer 2's cached V rows."""
    return f"layers.{layer}.{_SUFFIX[which]}"


def kv_of(path: str) -> Optional[tuple[int, str]]:
    """``(layer, "k" | "v")`` when ``path`` is a cached-row module, else ``None``."""
    m = _PATH.fullmatch(path)
    if not m:
        return None
    return int(m.group(1)), "k" if m.group(2).startswith("attention.rope") else "v"


@dataclass
class KvTable:
    """``k`` / ``v``: relative error ``[layers, positions]`` of the cached rows; means per layer;
    ``first_nonzero``: the first layer (and its first position) whose K or V rows differ above float
    rounding; ``worst``: where the error is largest."""

    layers: list[int]
    k: np.ndarray
    v: np.ndarray
    k_mean: list[float] = field(default_factory=list)
    v_mean: list[float] = field(default_factory=list)
    first_nonzero: Optional[dict[str, Any]] = None
    worst: Optional[dict[str, Any]] = None
    abs_floor: float = DEFAULT_ABS_FLOOR

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> Any:
            return float(x) if math.isfinite(x) else None

        return {"compared": "K rows after RoPE and V rows each layer writes into its cache, per position",
                "layers": list(self.layers), "k": [[num(v) for v in r] for r in self.k],
                "v": [[num(v) for v in r] for r in self.v], "k_mean": [num(v) for v in self.k_mean],
                "v_mean": [num(v) for v in self.v_mean], "first_nonzero": self.first_nonzero,
                "worst": self.worst, "abs_floor": self.abs_floor}


def _mean(row: np.ndarray) -> float:
    r = row[~np.isnan(row)]
    return math.inf if np.isinf(r).any() else (float(r.mean()) if r.size else math.nan)


def compare_kv(base: dict[str, Any], new: dict[str, Any], *, abs_floor: float = DEFAULT_ABS_FLOOR) -> Optional[KvTable]:
    """The K and V rows of every layer both runs logged, compared per position (``None`` when none is)."""
    layers = sorted({kv_of(p)[0] for p in base if kv_of(p) is not None}
                    & {kv_of(p)[0] for p in new if kv_of(p) is not None})
    rows: dict[str, list[np.ndarray]] = {"k": [], "v": []}
    n = min((len(base[p]) for p in base if kv_of(p) is not None and kv_of(p)[0] in layers), default=0)
    kept = []
    for i in layers:
        pair = {}
        for which in ("k", "v"):
            a, b = base.get(kv_path(i, which)), new.get(kv_path(i, which))
            if a is None or b is None:
                break
            a, b = np.asarray(a)[:n].reshape(n, -1), np.asarray(b)[:n].reshape(n, -1)
            if a.shape != b.shape:
                break
            pair[which] = relative_error(a, b)
        if len(pair) == 2:
            kept.append(i)
            rows["k"].append(pair["k"])
            rows["v"].append(pair["v"])
    if not kept:
        return None
    k, v = np.vstack(rows["k"]), np.vstack(rows["v"])
    table = KvTable(kept, k, v, [_mean(r) for r in k], [_mean(r) for r in v], abs_floor=abs_floor)
    for li, layer in enumerate(kept):
        for which, arr in (("k", k), ("v", v)):
            over = np.flatnonzero(~(arr[li] <= abs_floor) & ~np.isnan(arr[li]))
            if over.size and table.first_nonzero is None:
                table.first_nonzero = {"layer": layer, "cache": which, "position": int(over[0])}
    both = np.stack([k, v])
    if both.size and not np.isnan(both).all() and np.isfinite(np.nan_to_num(both, nan=0.0)).all():
        c, li, p = np.unravel_index(int(np.nanargmax(both)), both.shape)
        table.worst = {"layer": kept[li], "cache": "kv"[c], "position": int(p), "error": float(both[c, li, p])}
    return table
