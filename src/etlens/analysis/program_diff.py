"""What changed between two ExecuTorch programs, with the field names of ExecuTorch's ``diff_pte``.

Per execution plan (paired by position, as ExecuTorch's ``devtools/pte_tool/diff_pte.py`` does):
operators and delegates only in A or B (multiset differences, sorted), value and instruction
counts, ``non_const_buffer_sizes``, per-value differences (tensor metadata — dtype, sizes, dim
order, allocation — and constant data with ``num_differing``, ``max_abs_diff``, ``mean_abs_diff``
over the differing elements), plus plans only in one file and named-data keys only in one.
Like ``diff_pte``, a count pair (``value_count_a``/``_b`` …) is ``None`` when both sides agree.

On top of that etlens adds the memory and size deltas (arena sizes and peaks, bytes per kind).

Example::

    from etlens.analysis.program_diff import diff_programs
    d = diff_programs("a.pte", "b.pte")
    d["plans"][0]["operators_only_in_b"]     # ['aten::relu.out']
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import numpy as np

from ..readers.base import read_limited
from ..readers.pte import read_pte_bytes
from ..schema import SCALAR_TYPES
from .memory import analyze_memory
from .size import analyze_size

__all__ = ["diff_programs", "diff_plan"]


def _ops(plan: Any) -> Counter[str]:
    return Counter(op.qualified for op in plan.operators)


def _constant_bytes(data: Any, program: Any, idx: int, sizes: list[int]) -> bytes | None:
    """The stored bytes of constant buffer ``idx`` of the constant segment, ``None`` when unknown
    (``sizes`` is ``program.constant_sizes()``, computed once per program by the caller)."""
    offs = program.constant_segment_offsets
    if offs and program.constant_segment_index is not None and idx < len(offs) and idx < len(sizes):
        seg = program.segments[program.constant_segment_index]
        start = program.segment_base_offset + seg.offset + offs[idx]
        return bytes(data[start:start + sizes[idx]])
    return None


def _data_stats(a: bytes, b: bytes, scalar_type: int, numel: int) -> dict[str, Any]:
    info = SCALAR_TYPES.get(scalar_type)
    if info is None or info.storage is None:
        n = min(len(a), len(b))
        diff = sum(1 for i in range(n) if a[i] != b[i])
        return {"num_elements": n, "num_differing": diff, "max_abs_diff": 0.0, "mean_abs_diff": 0.0}
    dt = np.dtype(info.storage)
    count = min(numel, len(a) // dt.itemsize, len(b) // dt.itemsize)
    va = np.frombuffer(a, dt, count).astype(np.float64)
    vb = np.frombuffer(b, dt, count).astype(np.float64)
    neq = va != vb
    d = np.abs(va - vb)[neq]
    return {"num_elements": int(count), "num_differing": int(neq.sum()),
            "max_abs_diff": float(d.max()) if d.size else 0.0, "mean_abs_diff": float(d.mean()) if d.size else 0.0}


def _tensor_fields(t: Any) -> dict[str, Any]:
    return {"scalar_type": t.scalar_type, "storage_offset": t.storage_offset, "sizes": list(t.sizes),
            "dim_order": list(t.dim_order), "requires_grad": t.requires_grad, "layout": t.layout,
            "data_buffer_idx": t.data_buffer_idx, "shape_dynamism": t.shape_dynamism,
            "allocation_info": None if t.allocation is None else [t.allocation.memory_id, t.allocation.memory_offset],
            "fully_qualified_name": t.fully_qualified_name}


def diff_plan(index: int, pa: Any, pb: Any, da: Any, db: Any, prog_a: Any, prog_b: Any,
              sizes: tuple[list[int], list[int]] | None = None) -> dict[str, Any]:
    """One plan pair, ``diff_pte``'s ``ExecutionPlanDiff`` fields as JSON."""
    sa, sb = sizes if sizes is not None else (prog_a.constant_sizes(), prog_b.constant_sizes())
    out: dict[str, Any] = {"plan_index": index, "name": pa.name, "name_a": None, "name_b": None}
    if pa.name != pb.name:
        out["name_a"], out["name_b"] = pa.name, pb.name
    oa, ob = _ops(pa), _ops(pb)
    out["operators_only_in_a"] = sorted((oa - ob).elements())
    out["operators_only_in_b"] = sorted((ob - oa).elements())
    ga, gb = Counter(d.id for d in pa.delegates), Counter(d.id for d in pb.delegates)
    out["delegates_only_in_a"] = sorted((ga - gb).elements())
    out["delegates_only_in_b"] = sorted((gb - ga).elements())
    same_sizes = tuple(pa.non_const_buffer_sizes) == tuple(pb.non_const_buffer_sizes)
    out["non_const_buffer_sizes_a"] = None if same_sizes else list(pa.non_const_buffer_sizes)
    out["non_const_buffer_sizes_b"] = None if same_sizes else list(pb.non_const_buffer_sizes)
    va, vb = len(pa.values), len(pb.values)
    out["value_count_a"], out["value_count_b"] = (None, None) if va == vb else (va, vb)
    ia, ib = len(pa.instructions()), len(pb.instructions())
    out["instruction_count_a"], out["instruction_count_b"] = (None, None) if ia == ib else (ia, ib)
    tensor_diffs, evalue_diffs = [], []
    for idx in range(min(va, vb)):
        xa, xb = pa.values[idx], pb.values[idx]
        if xa.kind == "tensor" and xb.kind == "tensor" and xa.val is not None and xb.val is not None:
            fa, fb = _tensor_fields(xa.val), _tensor_fields(xb.val)
            meta = [{"field_name": k, "value_a": fa[k], "value_b": fb[k]} for k in fa if fa[k] != fb[k]]
            entry: dict[str, Any] = {"evalue_index": idx, "metadata_diffs": meta, "bytes_differ": False,
                                     "num_elements": 0, "num_differing": 0, "max_abs_diff": 0.0, "mean_abs_diff": 0.0}
            ba = _constant_bytes(da, prog_a, xa.val.data_buffer_idx, sa) if xa.val.data_buffer_idx > 0 else None
            bb = _constant_bytes(db, prog_b, xb.val.data_buffer_idx, sb) if xb.val.data_buffer_idx > 0 else None
            # as diff_pte: data on either side that is not the same on both is a data difference
            if (ba is not None or bb is not None) and ba != bb:
                entry.update(bytes_differ=True, byte_size_a=len(ba or b""), byte_size_b=len(bb or b""))
                if ba is not None and bb is not None:
                    numel = int(np.prod(xa.val.sizes)) if xa.val.sizes else 1
                    entry.update(_data_stats(ba, bb, xa.val.scalar_type, numel))
            if meta or entry["bytes_differ"]:
                tensor_diffs.append(entry)
        elif xa.kind != xb.kind:
            evalue_diffs.append({"evalue_index": idx, "type_a": xa.kind, "type_b": xb.kind, "type_mismatch": True})
        elif xa.val != xb.val:
            evalue_diffs.append({"evalue_index": idx, "type_a": xa.kind, "type_b": xb.kind, "type_mismatch": False,
                                 "value_a": _plain(xa.val), "value_b": _plain(xb.val)})
    out["tensor_diffs"] = tensor_diffs
    out["evalue_diffs"] = evalue_diffs
    out["tensors_only_in_a"] = [i for i in range(min(va, vb), va) if pa.values[i].kind == "tensor"]
    out["tensors_only_in_b"] = [i for i in range(min(va, vb), vb) if pb.values[i].kind == "tensor"]
    return out


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v if isinstance(v, (int, float, str, bool, type(None))) else str(v)


def _has_differences(p: dict[str, Any]) -> bool:
    return any(p[k] for k in ("name_a", "operators_only_in_a", "operators_only_in_b", "delegates_only_in_a",
                              "delegates_only_in_b", "tensor_diffs", "evalue_diffs", "tensors_only_in_a",
                              "tensors_only_in_b")) or any(p[k] is not None for k in (
        "non_const_buffer_sizes_a", "value_count_a", "instruction_count_a"))


def diff_programs(path_a: str | os.PathLike[str], path_b: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON-ready diff of two ``.pte`` files (see the module docstring)."""
    pa_, pb_ = os.fspath(path_a), os.fspath(path_b)
    da, db = read_limited(pa_), read_limited(pb_)
    out: dict[str, Any] = {"path_a": pa_, "path_b": pb_, "size_a": len(da), "size_b": len(db),
                           "bitwise_equal": bytes(da) == bytes(db)}
    art_a, art_b = read_pte_bytes(da, pa_), read_pte_bytes(db, pb_)
    prog_a, prog_b = art_a.program, art_b.program
    assert prog_a is not None and prog_b is not None
    out["version_a"], out["version_b"] = (None, None) if prog_a.version == prog_b.version else (
        prog_a.version, prog_b.version)
    n = min(len(prog_a.execution_plan), len(prog_b.execution_plan))
    sizes = (prog_a.constant_sizes(), prog_b.constant_sizes())
    plans = [diff_plan(i, prog_a.execution_plan[i], prog_b.execution_plan[i], da, db, prog_a, prog_b, sizes)
             for i in range(n)]
    out["plans"] = [p for p in plans if _has_differences(p)]
    out["all_plans"] = [{"plan_index": p["plan_index"], "name": p["name"],
                         "instruction_count": [len(prog_a.execution_plan[i].instructions()),
                                               len(prog_b.execution_plan[i].instructions())],
                         "value_count": [len(prog_a.execution_plan[i].values), len(prog_b.execution_plan[i].values)]}
                        for i, p in enumerate(plans)]
    out["extra_plans_in_a"] = [p.name for p in prog_a.execution_plan[n:]]
    out["extra_plans_in_b"] = [p.name for p in prog_b.execution_plan[n:]]
    ka, kb = {nd.key for nd in prog_a.named_data}, {nd.key for nd in prog_b.named_data}
    out["named_data_diffs"] = ([{"key": k, "only_in": "A"} for k in sorted(ka - kb)]
                               + [{"key": k, "only_in": "B"} for k in sorted(kb - ka)])
    out["memory"] = _memory_delta(art_a, art_b)
    out["size"] = _size_delta(da, db, pa_, pb_)
    return out


def _memory_delta(art_a: Any, art_b: Any) -> list[dict[str, Any]]:
    ma, mb = analyze_memory(art_a), analyze_memory(art_b)
    out = []
    for x, y in zip(ma.methods, mb.methods, strict=False):
        arenas = {a.id: [a, None] for a in x.arenas}
        for b in y.arenas:
            arenas.setdefault(b.id, [None, None])[1] = b
        out.append({"method": x.name, "arenas": [
            {"id": aid, "size_a": a.size if a else 0, "size_b": b.size if b else 0,
             "peak_live_a": a.peak_live if a else 0, "peak_live_b": b.peak_live if b else 0,
             "size_delta": (b.size if b else 0) - (a.size if a else 0)} for aid, (a, b) in sorted(arenas.items())]})
    return out


def _size_delta(da: Any, db: Any, na: str, nb: str) -> dict[str, Any]:
    ka, kb = analyze_size(da, na).by_kind(), analyze_size(db, nb).by_kind()
    kinds = sorted(set(ka) | set(kb))
    return {"total_a": len(da), "total_b": len(db), "delta": len(db) - len(da),
            "by_kind": {k: {"a": ka.get(k, 0), "b": kb.get(k, 0), "delta": kb.get(k, 0) - ka.get(k, 0)}
                        for k in kinds}}
