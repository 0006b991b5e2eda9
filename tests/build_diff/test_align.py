"""Alignment by what survives a rebuild, on hand-made source ops (no artifacts): renamed nodes, other
partitions, decompositions, fusions, and what cannot be aligned."""

from __future__ import annotations

import numpy as np

from etlens.analysis.build_diff import SourceOp, align, row_kind


def op(key, path, main, ops=None, shape=(4, 8), placement="XnnpackBackend", pos=0, ms=0.1, **kw):
    return SourceOp(key=key, module_path=path, module_type="", op=main, ops=list(ops or [main]),
                    nodes=[f"n{key}_{i}" for i in range(len(ops or [main]))], position=pos, shapes=(shape,),
                    placement=placement, time_ms=np.full(5, ms), **kw)


def test_renamed_and_reordered_handles_align_exactly():
    a = [op(1, "l0", "linear", pos=0), op(2, "", "relu", pos=1), op(3, "l1", "linear", pos=2)]
    b = [op(17, "l0", "linear", pos=0), op(9, "", "relu", pos=1), op(4, "l1", "linear", pos=2)]
    rows = align(a, b)
    assert [(r.a.key, r.b.key, r.how) for r in rows] == [(1, 17, "exact"), (2, 9, "exact"), (3, 4, "exact")]
    assert all(row_kind(r) is None for r in rows)


def test_decomposition_one_op_becomes_three():
    a = [op(1, "blk.norm", "layer_norm", pos=0), op(2, "blk.fc", "linear", pos=1)]
    b = [op(1, "blk.norm", "mean", ops=["mean", "sub", "rsqrt"], pos=0), op(2, "blk.fc", "linear", pos=3)]
    rows = align(a, b)
    r = next(x for x in rows if x.module_path == "blk.norm")
    assert r.how == "module" and r.a.op == "layer_norm" and r.b.ops == ["mean", "sub", "rsqrt"]
    assert row_kind(r) == "decomposition"


def test_partition_change_and_unaligned_ops_are_listed():
    a = [op(1, "l0", "linear", pos=0), op(2, "l1", "linear", pos=1)]
    b = [op(1, "l0", "linear", pos=0), op(5, "l1", "addmm", ops=["permute_copy", "addmm"], placement="portable",
                                           pos=1),
         op(6, "l1", "_to_dim_order_copy", pos=2), op(7, "extra", "cumsum", pos=3)]
    rows = align(a, b)
    kinds = {(r.module_path, r.how): row_kind(r) for r in rows}
    assert kinds[("l1", "module")] == "placement"
    assert kinds[("l1", "only_b")] == "copies"
    assert kinds[("extra", "only_b")] == "pass"
    assert sum(r.a is None for r in rows) == 2


def test_quantized_on_one_side():
    a = [op(1, "l0", "linear", ops=["dequantize_per_tensor", "linear"], const_dtypes=["float32", "int8"])]
    b = [op(1, "l0", "linear", const_dtypes=["float32"])]
    (r,) = align(a, b)
    assert r.how == "exact" and row_kind(r) == "quantization"


def test_other_quantization_scheme():
    a = [op(1, "l0", "linear", ops=["dequantize_per_tensor", "linear"], const_dtypes=["int8"])]
    b = [op(1, "l0", "linear", ops=["dequantize_per_channel", "linear"], const_dtypes=["int8"])]
    (r,) = align(a, b)
    assert row_kind(r) == "quantization"


class _Build:
    """What find_causes reads of a loaded build (sizes, runs, the pass trace's origins)."""

    arena_bytes = peak_live_bytes = 4096
    size = 10_000
    execute_ms = [1.0] * 5

    def __init__(self, origins=None):
        self.origins = origins or {}

    def _method_memory(self):
        return None

    def pass_origins(self):
        return self.origins


def test_causes_name_the_pass_from_the_trace():
    from etlens.analysis.build_diff import find_causes

    a = [op(1, "l0", "linear", pos=0)]
    b = [op(1, "l0", "linear", pos=0), op(7, "extra", "cumsum", pos=1)]
    rows = align(a, b)
    causes = find_causes(rows, a, b, a=_Build(), b=_Build({"n7_0": "InsertCumsumPass"}), time_moved=False,
                         time_floor_ratio=1.05)
    (c,) = causes
    assert (c.module_path, c.kind, c.share) == ("extra", "pass", 1.0)
    assert "added by InsertCumsumPass (pass trace)" in c.explanation
