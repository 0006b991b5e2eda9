"""A build's per-module outputs per position, from its ETDump intermediate outputs and its ETRecord.

The runtime logs every kernel's output and every delegate call's tensors (debug buffer); the
ETRecord ties each logged event, through its debug handles, to graph nodes and their
``nn_module_stack`` (``layers.3.feed_forward`` …). A module's output is the output of the **last
logged operator inside it** in the run (for ``layers.3.attention``: the ``wo`` linear; for the
block ``layers.3``: the second residual add). Module paths are what two different builds share:
an fp32 and an 8da4w graph have different ops and debug handles, but the same modules.

A run (one ``forward`` call) adds the positions the job says it fed (``runs[i]["positions"]``);
a tensor with one row per fed token gives each position its row (``[1, T, dim]``); a tensor of
another shape (the last-token head of a program without full logits) gives the last position.

Example::

    from etlens.analysis.llm_diff.capture import capture_modules
    acts = capture_modules("run.etdp", "model.etrecord", "run.bin", runs, n_positions)
    acts.values["layers.2"].shape      # (n_positions, dim); NaN rows where a position was not logged
    acts.ops["layers.2.attention"]     # the operator standing for the module
    acts.values["layers.2.attention.wv"]   # the V rows layer 2 wrote into its cache (see .kv)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...errors import EtlensError
from .kv import KV_KINDS

__all__ = ["ModuleCapture", "capture_modules", "COMPARED"]

#: module kinds compared (``*`` = layer number), in the order a Llama runs them
COMPARED = ("tok_embeddings", "layers.*.attention_norm", "layers.*.attention", "layers.*.ffn_norm",
            "layers.*.feed_forward", "layers.*", "norm", "output")
#: also captured: the rows each layer writes into its KV cache (:mod:`.kv`)
CAPTURED = COMPARED + KV_KINDS
_KIND = re.compile(r"layers\.\d+")
_SKIP = {"OPERATOR_CALL", "Method::execute", "Program::load_method", "Method::init"}


@dataclass
class ModuleCapture:
    """``values``: module path -> ``[positions, features]`` float64 (NaN where not logged);
    ``order``: module paths in execution order; ``ops``: module -> the operator event standing for it."""

    values: dict[str, np.ndarray] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    ops: dict[str, str] = field(default_factory=dict)


def _kind(path: str) -> str:
    return _KIND.sub("layers.*", path)


def _paths(hierarchy: Any) -> list[str]:
    """Module paths of one node's ``nn_module_stack`` entries (outermost first)."""
    out: list[str] = []
    for entry in (hierarchy or {}).values():
        path = entry[0] if isinstance(entry, (tuple, list)) and entry else entry
        if isinstance(path, str) and path and path not in out:
            out.append(_clean(path))
    return sorted(out, key=lambda p: p.count("."))


def _clean(path: str) -> str:
    """``L['self'].layers.0`` / ``L__self___layers_0`` spellings -> ``layers.0``."""
    path = re.sub(r"^L\['self'\]\.?", "", path)
    path = re.sub(r"\[['\"]?([^\]'\"]+)['\"]?\]", r".\1", path)
    return path.lstrip(".")


def _tensors(data: Any) -> list[Any]:
    return [t for t in (data or []) if hasattr(t, "shape")]


def capture_modules(etdump: str, etrecord: str, debug_buffer: str, runs: list[dict], n_positions: int,
                    *, method: str = "forward") -> ModuleCapture:
    """Per-module outputs of every position (see the module docstring)."""
    from ..inspector import Inspector

    try:
        insp = Inspector(etdump_path=etdump, etrecord=etrecord, debug_buffer_path=debug_buffer)
        blocks = list(insp.event_blocks)
    except EtlensError:
        raise
    except Exception as exc:  # noqa: BLE001 - a dump the reader cannot pair is the user's input
        raise EtlensError(f"{etdump}: cannot read its intermediate outputs with {etrecord} ({exc})") from None
    # Every run of a block has the same events: find, once, the last event inside each module.
    last: dict[str, tuple[int, int, str]] = {}  # path -> (block, event, op name)
    first_seen: dict[str, tuple[int, int]] = {}
    for bi, block in enumerate(blocks):
        for i, e in enumerate(block.events):
            if e.name in _SKIP or not e.module_hierarchy or e.debug_data is None:
                continue
            nodes = list(e.module_hierarchy.values())
            for path in _paths(nodes[-1]) if nodes else []:
                if _kind(path) in CAPTURED:
                    last[path] = (bi, i, e.name)
                    first_seen.setdefault(path, (bi, i))
    if not last:
        raise EtlensError(f"{etrecord}: no logged operator of {etdump} maps to a module path (nn_module_stack); "
                          "is this the ETRecord of the same build?")
    cap = ModuleCapture()
    for col, run in enumerate(runs):
        if run.get("logits_only"):
            continue
        positions = list(run["positions"])
        for path, (bi, i, name) in last.items():
            arrays = [v for v in insp.run_debug_data(bi, i, col) if isinstance(v, np.ndarray)]
            if not arrays:
                continue
            rows = _rows(np.asarray(arrays[-1], dtype=np.float64), len(positions))
            if path not in cap.values:
                cap.values[path] = np.full((n_positions, rows.shape[1]), np.nan)
                cap.ops[path] = name
            if rows.shape[1] != cap.values[path].shape[1]:
                continue
            if rows.shape[0] == len(positions):
                cap.values[path][positions] = rows
            else:
                cap.values[path][positions[-1]] = rows[-1]
    cap.order = sorted(cap.values, key=lambda p: first_seen[p])
    cap.order = _execution_order(cap.order)
    return cap


def _rows(arr: np.ndarray, tokens: int) -> np.ndarray:
    """One row per fed token when the tensor has a token axis (``[batch, T, ...]`` or ``[T, dim]``), else one row.

    ``[1, dim]`` is one row even when ``dim`` happens to equal the tokens fed (the last-token head
    of a program without full logits).
    """
    shape = arr.shape
    if tokens > 1 and len(shape) >= 3 and shape[1] == tokens:
        return np.moveaxis(arr, 1, 0).reshape(tokens, -1)
    if tokens > 1 and len(shape) == 2 and shape[0] == tokens:
        return arr.reshape(tokens, -1)
    return arr.reshape(1, -1)


def _execution_order(paths: list[str]) -> list[str]:
    """A block's parts before the block itself (its output is its last op; its first op comes earlier)."""
    def key(p: str) -> tuple:
        m = re.match(r"layers\.(\d+)(?:\.(\w+))?$", p)
        if p == "tok_embeddings":
            return (-1, 0)
        if m:
            part = m.group(2)
            rank = {"attention_norm": 0, "attention": 1, "ffn_norm": 2, "feed_forward": 3}.get(part or "", 4)
            return (int(m.group(1)), rank)
        return (10 ** 9, ["norm", "output"].index(p) if p in ("norm", "output") else 2)
    return sorted(paths, key=key)


def layer_count(cap: ModuleCapture) -> Optional[int]:
    """Number of ``layers.N`` blocks logged (``None`` when none)."""
    idx = [int(m.group(1)) for p in cap.values if (m := re.match(r"layers\.(\d+)$", p))]
    return max(idx) + 1 if idx else None
