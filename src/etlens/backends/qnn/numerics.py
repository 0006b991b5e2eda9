"""Numerics inside QNN (the ``numerics`` hook, analysis floor): per-op outputs of the NPU against the reference.

A QNN program compiled with ``dump_intermediate_outputs=True`` and run with a debug buffer logs one
debug event per QNN tensor, named ``<op>@<output>`` (``aten_relu_default@0``), with no debug handle.
Inside the delegate tensors are NHWC where the op is layout-sensitive (convolutions, pools: QNN's
layout transform), and in int8 programs they are the raw quantized integers. :func:`qnn_inside`:

* pairs each tensor with the reference node of the same name (ops the backend inserted, such as
  layout permutes, have no reference node and are listed apart);
* dequantizes raw integers with the node's encoding, read from the ETRecord's graph (the
  ``quantize_per_tensor`` that consumes the node's output: the same scale and zero point QNN's
  ``quant_attrs`` carry);
* brings NHWC back to NCHW when the reference is 4-D and the runtime tensor is its permutation;
* compares with the reference output of that node (for int8 graphs the fake-quantized value: the
  reference keeps the last node of the handle group, the dequantize after the node), and names the
  first divergence: the first op in graph order whose SNR falls below ``snr_db`` (default 20 dB) or,
  with a threshold, whose gap crosses it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["QnnInsideRow", "QnnInside", "qnn_inside", "qnn_tensors", "encodings", "nhwc_nodes", "inside_rows",
           "DEFAULT_SNR_DB"]

DEFAULT_SNR_DB = 20.0
_Q = "quantize_per_tensor"
_ARGS = re.compile(r"^%(?P<src>[^,]+),\s*(?P<scale>[-+0-9.eE]+),\s*(?P<zp>-?\d+)")


@dataclass
class QnnInsideRow:
    """One QNN op output compared with its reference node."""

    node: str
    target: str = ""
    module_path: str = ""
    order: int = 0
    runtime_shape: tuple = ()
    reference_shape: tuple = ()
    layout: str = ""  # "NHWC->NCHW" when the runtime tensor was permuted back
    dtype: str = ""
    scale: float | None = None
    zero_point: int | None = None
    gap: float | None = None
    snr_db: float | None = None
    max_abs: float | None = None
    crosses: bool = False
    note: str = ""

    def to_json(self, metric: str) -> dict[str, Any]:
        return {"node": self.node, "aot_ops": [self.node], "runtime_ops": [f"{self.node}@0"], "target": self.target,
                "module_path": self.module_path, "inside_delegate": True, "backend": "QnnBackend",
                "gap": [self.gap], "metric": metric, "snr_db": self.snr_db, "max_abs": self.max_abs,
                "layout": self.layout, "runtime_dtype": self.dtype, "scale": self.scale,
                "zero_point": self.zero_point, "runtime_shape": list(self.runtime_shape),
                "reference_shape": list(self.reference_shape), "crosses_threshold": self.crosses, "note": self.note}


@dataclass
class QnnInside:
    """Rows of one dump, in graph order, plus the QNN tensors without a reference node."""

    rows: list[QnnInsideRow] = field(default_factory=list)
    unpaired: list[dict[str, Any]] = field(default_factory=list)
    metric: str = "MSE"
    criterion: str = ""
    #: every QNN tensor name of the dump (``<op>@<n>``): generic pairing by debug handle is not right for them
    names: list[str] = field(default_factory=list)

    @property
    def first_divergence(self) -> QnnInsideRow | None:
        return next((r for r in self.rows if r.crosses), None)

    def first_divergence_json(self) -> dict[str, Any] | None:
        r = self.first_divergence
        if r is None:
            return None
        return {"op": r.node, "node": r.node, "target": r.target, "module_path": r.module_path,
                "inside_delegate": True, "backend": "QnnBackend", "gap": [r.gap], "metric": self.metric,
                "snr_db": r.snr_db, "criterion": self.criterion}


def qnn_tensors(etdump: Any, buffer: Any) -> list[tuple[str, np.ndarray, str]]:
    """``[(name, array, dtype)]`` of the first run's QNN per-op tensors (debug events named ``<op>@<n>``)."""
    from etlens.readers.etdump import DebugBuffer, read_etdump

    dump = etdump if hasattr(etdump, "runs") else read_etdump(str(etdump))
    buf = buffer if isinstance(buffer, DebugBuffer) else DebugBuffer(str(buffer))
    for ri, run in enumerate(dump.runs):
        out = []
        for i in np.flatnonzero(run.kind == 2):
            sid = int(run.delegate_id_str[i])
            name = dump.string(sid) if sid >= 0 else None
            if not name or "@" not in name:
                continue
            vt, ref = dump.debug_entry(ri, int(i))
            if ref is None or not hasattr(ref, "sizes"):
                continue
            arr = np.asarray(buf.array(ref))
            out.append((name, arr, str(getattr(ref, "dtype_name", arr.dtype))))
        if out:
            return out
    return []


def encodings(graph: Any) -> dict[str, tuple[float, int]]:
    """``{node name: (scale, zero point)}`` from the ``quantize_per_tensor`` nodes of an etlens Graph (the
    node each one quantizes; through ``getitem`` to the multi-output node; a quantize node's own too)."""
    by_name = {n.name: n for n in graph.nodes}
    out: dict[str, tuple[float, int]] = {}
    for n in graph.nodes:
        if _Q not in (n.target or "") or "dequantize" in (n.target or ""):
            continue
        m = _ARGS.match(str((n.attrs or {}).get("args") or ""))
        if not m:
            continue
        qp = (float(m["scale"]), int(m["zp"]))
        out.setdefault(n.name, qp)
        src = m["src"].strip()
        out.setdefault(src, qp)
        s = by_name.get(src)
        if s is not None and (s.target or "") == "getitem" and s.inputs:
            parent = getattr(s.inputs[0], "name", s.inputs[0])
            out.setdefault(str(parent).split(":")[0], qp)
    return out


#: ExecuTorch 1.5.1's QNN layout transform (``_passes/layout_transform.py``): ops that run NHWC ...
_SENSITIVE = frozenset(f"aten.{x}" for x in (
    "adaptive_avg_pool2d.default", "_adaptive_avg_pool3d.default", "adaptive_max_pool2d.default",
    "avg_pool2d.default", "avg_pool3d.default", "convolution.default", "grid_sampler_2d.default",
    "grid_sampler_3d.default", "instance_norm.default", "max_pool2d_with_indices.default",
    "_native_batch_norm_legit_no_training.default", "_native_batch_norm_legit.no_stats", "native_group_norm.default",
    "pixel_shuffle.default", "pixel_unshuffle.default", "upsample_bicubic2d.default", "upsample_bicubic2d.vec",
    "upsample_bilinear2d.default", "upsample_bilinear2d.vec", "upsample_nearest2d.default",
    "upsample_nearest2d.vec"))
#: ... and ops that take the layout of their neighbours
_AGNOSTIC = frozenset(f"aten.{x}" for x in """abs.default add.Tensor amax.default amin.default asin.default
atan.default bitwise_or.Tensor bitwise_xor.Tensor bmm.default bitwise_and.Tensor cat.default ceil.default
clamp.default constant_pad_nd.default cumsum.default div.Tensor elu.default eq.Tensor exp.default flip.default
floor.default floor_divide.default full.default full_like.default ge.Tensor gelu.default gt.Tensor
hardswish.default hardsigmoid.default hardtanh.default le.Tensor linear.default log.default logical_and.default
logical_not.default lt.Scalar lt.Tensor max.dim maximum.default mean.dim min.dim minimum.default mul.Tensor
ne.Scalar ne.Tensor neg.default pow.Tensor_Scalar prelu.default rand.default randn.default reflection_pad1d.default
reflection_pad2d.default repeat.default relu.default round.default scatter.src scatter.value scatter_add.default
scatter_reduce.two sigmoid.default sign.default slice_copy.Tensor sort.default split_with_sizes.default
split_with_sizes_copy.default sqrt.default sub.Tensor sum.dim_IntList topk.default _to_copy.default
where.self""".split())


def _wire(target: str) -> bool:
    """Nodes the layout passes through unchanged in the ETRecord graph (QNN folds q/dq into encodings)."""
    return target == "getitem" or "quantize_per" in target


def nhwc_nodes(graph: Any) -> set[str]:
    """Names of the nodes whose QNN tensors are NHWC: the layout-sensitive ops and the layout-agnostic ops
    joined to them (through ``getitem`` and quantize/dequantize), as QNN's layout transform marks them."""
    nodes = [n for n in graph.nodes if n.kind == "op"]
    by_name = {n.name: n for n in nodes}
    nbrs: dict[str, set[str]] = {n.name: set() for n in nodes}
    for n in nodes:
        for i in n.inputs or ():
            src = str(getattr(i, "name", i)).split(":")[0]
            if src in by_name:
                nbrs[n.name].add(src)
                nbrs[src].add(n.name)
    marked = {n.name for n in nodes if (n.target or "") in _SENSITIVE}
    todo = list(marked)
    seen = set(marked)
    while todo:  # spread through wires and agnostic ops
        cur = todo.pop()
        for nb in nbrs.get(cur, ()):
            t = by_name[nb].target or ""
            if nb in seen or not (_wire(t) or t in _AGNOSTIC):
                continue
            seen.add(nb)
            todo.append(nb)
            if t in _AGNOSTIC:
                marked.add(nb)
    return marked


def _to_reference_layout(arr: np.ndarray, ref_shape: tuple, nhwc: bool = False) -> tuple[np.ndarray, str]:
    nhwc_shape = (ref_shape[0], ref_shape[2], ref_shape[3], ref_shape[1]) if len(ref_shape) == 4 else None
    if arr.ndim == 4 and tuple(arr.shape) == nhwc_shape and (nhwc or tuple(arr.shape) != tuple(ref_shape)):
        return arr.transpose(0, 3, 1, 2), "NHWC->NCHW"
    if tuple(arr.shape) == tuple(ref_shape):
        return arr, ""
    if arr.size == int(np.prod(ref_shape)):
        return arr.reshape(ref_shape), "reshaped"
    return arr, "shape mismatch"


def _snr(ref: np.ndarray, x: np.ndarray) -> float:
    noise = float(np.mean((ref - x) ** 2))
    signal = float(np.mean(ref ** 2))
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10 * math.log10(signal / noise)


def _gap(metric: str, ref: np.ndarray, x: np.ndarray) -> float:
    m = metric.lower()
    if m == "mse":
        return float(np.mean((ref - x) ** 2))
    if m == "l1":
        return float(np.mean(np.abs(ref - x)))
    if m == "max_abs":
        return float(np.max(np.abs(ref - x))) if ref.size else 0.0
    if m == "snr":
        return _snr(ref, x)
    if m == "cosine":
        a, b = ref.ravel(), x.ravel()
        d = float(np.linalg.norm(a) * np.linalg.norm(b))
        return float(a @ b / d) if d else (1.0 if not a.any() and not b.any() else 0.0)
    raise ValueError(f"unknown metric {metric!r}")


def qnn_inside(capture: Any, tensors: list[tuple[str, np.ndarray, str]], graph: Any = None, metric: str = "MSE",
               threshold: float | None = None, snr_db: float = DEFAULT_SNR_DB) -> QnnInside:
    """Compare QNN's per-op tensors with the reference ``capture`` (:class:`etlens.analysis.numerics.Capture`).

    ``graph``: the ETRecord's edge graph (an etlens Graph) for int8 encodings; ``threshold`` with
    ``metric`` decides crossings like ``etlens gap --fail-on-gap`` (above for MSE/L1/max_abs, below for
    SNR/cosine); without it a row diverges when its SNR is below ``snr_db``.
    """
    enc = encodings(graph) if graph is not None else {}
    nhwc = nhwc_nodes(graph) if graph is not None else set()
    out = QnnInside(metric=metric, criterion=(f"{metric} crosses {threshold:g}" if threshold is not None
                                              else f"SNR below {snr_db:g} dB"))
    higher_better = metric.lower() in ("snr", "cosine")
    out.names = [t[0] for t in tensors]
    for name, arr, dtype in tensors:
        node = name.rsplit("@", 1)[0]
        if node not in capture.nodes and node.startswith("output_"):
            # a graph output tensor is named after its node with ``output_`` in front
            inner = capture.nodes.get(node[len("output_"):])
            if inner is not None and "quantize_per" not in (inner.target or ""):
                node = inner.name
        ref_node = capture.nodes.get(node)
        if ref_node is None or ref_node.handle is None or ref_node.handle not in capture.outputs:
            out.unpaired.append({"name": name, "reason": "no reference node of this name: an op QNN inserted "
                                                          "(layout permute, boundary quantize) or an I/O tensor"})
            continue
        ref = capture.outputs[ref_node.handle]
        ref = ref[0] if isinstance(ref, (list, tuple)) else ref
        ref_np = np.asarray(ref.detach().float().numpy() if hasattr(ref, "detach") else ref, dtype=np.float64)
        row = QnnInsideRow(node=node, target=ref_node.target, module_path=ref_node.module_path or "",
                           order=ref_node.order, runtime_shape=tuple(arr.shape), reference_shape=tuple(ref_np.shape),
                           dtype=dtype)
        x = arr.astype(np.float64)
        if np.issubdtype(arr.dtype, np.integer):
            qp = enc.get(node)
            if qp is None:
                row.note = "raw integers without an encoding in the ETRecord: compared as they are"
            else:
                row.scale, row.zero_point = qp
                x = (x - qp[1]) * qp[0]
        x, row.layout = _to_reference_layout(x, tuple(ref_np.shape), node in nhwc)
        if row.layout == "shape mismatch":
            row.note = f"runtime shape {tuple(arr.shape)} does not match the reference {tuple(ref_np.shape)}"
            out.rows.append(row)
            continue
        row.gap = _gap(metric, ref_np, x)
        row.snr_db = _snr(ref_np, x)
        row.max_abs = float(np.max(np.abs(ref_np - x))) if x.size else 0.0
        if threshold is not None:
            row.crosses = bool(row.gap < threshold if higher_better else row.gap > threshold)
        else:
            row.crosses = bool(row.snr_db < snr_db)
        out.rows.append(row)
    out.rows.sort(key=lambda r: r.order)
    return out


def inside_rows(analysis: Any, etdump: str, debug_buffer: str, etrecord: str, metric: str = "MSE",
                threshold: float | None = None) -> QnnInside | None:
    """The hook ``etlens gap`` calls: QNN per-op rows of a dump, None when it holds no QNN per-op tensors."""
    tensors = qnn_tensors(etdump, debug_buffer)
    if not tensors:
        return None
    from etlens.readers.etrecord import read

    graphs = read(etrecord).graphs()
    # QNN names its tensors after the nodes of the graph it lowered: ExecuTorch's QNN flow records it as
    # ``edge_after_transform/<method>`` (activation quantize/dequantize folded into encodings, as the
    # QNNIntermediateDebugger compares); older records have only the edge program (with q/dq nodes)
    edge = [k for k in graphs if k.startswith("edge_dialect_exported_program")]
    after = [k for k in graphs if k.startswith("edge_after_transform")]
    stage = (after or edge or [None])[0]
    if stage is None:
        return None
    if stage != analysis.reference_graph:
        from etlens.analysis import numerics

        analysis = numerics.analyze(analysis.inspector, stage, inputs=analysis.inputs)
    # encodings live on the quantize nodes of the edge program (the folded graph keeps them only in memory)
    enc_graph = graphs.get(edge[0]) if edge else graphs.get(stage)
    return qnn_inside(analysis.capture, tensors, enc_graph, metric=metric, threshold=threshold)
