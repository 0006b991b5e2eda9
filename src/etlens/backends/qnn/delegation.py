"""Why a node stayed on the CPU in a QNN program (the ``delegation`` hook, analysis floor).

ExecuTorch's QNN partitioner (``QnnOperatorSupport.is_node_supported``, ExecuTorch 1.5.1) decides
per node, in this order, and logs its words at INFO level:

1. ``not_supported_operator`` (``_embedding_bag``, ``_clone_dim_order``, ``embedding_4bit``): never;
2. ``to_be_implemented_operator``: "Skipped, this op can be supported, please report an issue";
3. a node marked for fallback: "Forced Fallback"; ``getitem`` and parameter dequantizes: "Forced Passed";
4. ``skip_node_id_set`` / ``skip_node_op_set`` given by the user: "Skipped";
5. no builder (node visitor) for the op: "No node visitor, unsupported";
6. otherwise QNN itself validates the op (``IsNodeSupportedByBackend``) for the SoC and precision.

The log is not kept in any artifact, so :func:`qnn_delegation` replays steps 1, 2 and 5 from the
tables below (facts of ExecuTorch 1.5.1's ``partition/common_defs.py`` and its registered node
visitors); a CPU node whose op has a builder was refused by step 4 or 6, which the ETRecord cannot tell
apart, and its reason says so. No ExecuTorch or QNN needed.

Example::

    d = qnn_delegation("model.etrecord")
    [(n["name"], n["reason"]) for n in d.to_json()["nodes"] if n["backend"] is None]
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NOT_SUPPORTED", "TO_BE_IMPLEMENTED", "NODE_VISITORS", "QnnDelegation", "qnn_delegation", "estimates",
           "cpu_reason"]

NOT_SUPPORTED = frozenset({"aten._embedding_bag.default", "dim_order_ops._clone_dim_order.default",
                           "quantized_decomposed.embedding_4bit.dtype"})
TO_BE_IMPLEMENTED = frozenset({
    "aten.adaptive_max_pool3d.default", "aten.max_pool3d_with_indices.default", "aten.median.default",
    "aten.median.dim", "aten.round.decimals", "aten.le.Scalar", "aten.bitwise_not.default"})
#: ops with a QNN builder (node visitor) in ExecuTorch 1.5.1
NODE_VISITORS = frozenset("""
aten._adaptive_avg_pool3d.default aten._log_softmax.default aten._native_batch_norm_legit.no_stats
aten._native_batch_norm_legit_no_training.default aten._safe_softmax.default aten._softmax.default
aten._to_copy.default aten.abs.default aten.adaptive_avg_pool2d.default aten.adaptive_max_pool2d.default
aten.add.Tensor aten.amax.default aten.amin.default aten.arange.start_step aten.argmax.default aten.argmin.default
aten.asin.default aten.atan.default aten.avg_pool2d.default aten.avg_pool3d.default aten.bitwise_and.Tensor
aten.bitwise_or.Tensor aten.bitwise_xor.Tensor aten.bmm.default aten.cat.default aten.ceil.default
aten.channel_shuffle.default aten.clamp.default aten.constant_pad_nd.default aten.convolution.default
aten.copy.default aten.cos.default aten.cumsum.default aten.div.Tensor aten.elu.default aten.embedding.default
aten.eq.Tensor aten.exp.default aten.expand_copy.default aten.flip.default aten.floor.default
aten.floor_divide.default aten.full.default aten.full_like.default aten.gather.default aten.ge.Tensor
aten.gelu.default aten.grid_sampler_2d.default aten.grid_sampler_3d.default aten.gt.Tensor
aten.hardsigmoid.default aten.hardswish.default aten.hardtanh.default aten.index.Tensor aten.index_put.default
aten.index_select.default aten.instance_norm.default aten.isinf.default aten.isnan.default aten.le.Tensor
aten.linear.default aten.log.default aten.logical_and.default aten.logical_not.default aten.lt.Tensor
aten.matmul.default aten.max.dim aten.max_pool2d_with_indices.default aten.maximum.default aten.mean.dim
aten.min.dim aten.minimum.default aten.mm.default aten.mul.Tensor aten.native_group_norm.default
aten.native_layer_norm.default aten.ne.Tensor aten.neg.default aten.permute_copy.default
aten.pixel_shuffle.default aten.pixel_unshuffle.default aten.pow.Tensor_Tensor aten.prelu.default
aten.rand.default aten.rand_like.default aten.randn.default aten.randn_like.default aten.reciprocal.default
aten.reflection_pad1d.default aten.reflection_pad2d.default aten.relu.default aten.repeat.default
aten.rms_norm.default aten.round.default aten.rsqrt.default aten.scatter.src aten.scatter.value
aten.scatter_add.default aten.scatter_reduce.two aten.select.int aten.select_copy.int aten.sigmoid.default
aten.sign.default aten.sin.default aten.slice_copy.Tensor aten.slice_scatter.default aten.sort.default
aten.split_with_sizes.default aten.split_with_sizes_copy.default aten.sqrt.default aten.squeeze.dims
aten.squeeze_copy.dims aten.stack.default aten.sub.Tensor aten.sum.dim_IntList aten.tanh.default
aten.topk.default aten.unbind.int aten.unsqueeze_copy.default aten.upsample_bicubic2d.vec
aten.upsample_bilinear2d.default aten.upsample_bilinear2d.vec aten.upsample_nearest2d.default
aten.upsample_nearest2d.vec aten.view_copy.default aten.where.self dim_order_ops._to_dim_order_copy.default
getitem qnn_custom.hadamard_transform.default quantized_decomposed.dequantize_per_channel.default
quantized_decomposed.dequantize_per_channel.tensor quantized_decomposed.dequantize_per_tensor.default
quantized_decomposed.dequantize_per_tensor.tensor quantized_decomposed.quantize_per_channel.default
quantized_decomposed.quantize_per_tensor.default scalar_tensor.default
""".split())
_QDQ = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel")


def cpu_reason(target: str, name: str = "") -> str:
    """The reason ExecuTorch 1.5.1's QNN support check gives for an op ``target`` (``aten.erf.default``)."""
    t = target or ""
    if t in ("getitem", "operator.getitem") or name.startswith("getitem"):
        return "not an operator: it reads one output of the previous call (a QNN delegate or a multi-output op)"
    if t in NOT_SUPPORTED:
        return f"{t} | not supported: ExecuTorch's QNN partitioner lists it in not_supported_operator"
    if t in TO_BE_IMPLEMENTED:
        return (f"{t} | Skipped, this op can be supported (ExecuTorch's QNN partitioner lists it as "
                "to_be_implemented_operator)")
    if t not in NODE_VISITORS:
        return f"{t} | No node visitor, unsupported: ExecuTorch's QNN backend has no builder for this op"
    if any(q in t for q in _QDQ):
        return (f"{t} | a quantize/dequantize at the edge of a QNN partition: the float<->int8 conversion of "
                "a tensor that enters or leaves the NPU from CPU ops")
    return (f"{t} | has a QNN builder but stayed on the CPU: QNN's own op validation (IsNodeSupportedByBackend) "
            "refused it for this SoC and precision, or it was skipped with skip_node_id_set/skip_node_op_set")


@dataclass
class QnnDelegation:
    """Every operator node of a QNN program: which backend runs it and, for CPU nodes, why."""

    nodes: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        cpu = [n for n in self.nodes if n["backend"] is None]
        return {"nodes": self.nodes, "qnn": {"npu_nodes": len(self.nodes) - len(cpu), "cpu_nodes": len(cpu),
                                            "cpu_reasons": {n["name"]: n["reason"] for n in cpu}}}


def _row(node: Any, backend: str | None, delegate: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": node.name, "target": node.target or "", "module_path": node.module_path or "",
                           "backend": backend}
    if backend is None:
        out["reason"] = cpu_reason(node.target or "", node.name)
    else:
        out["delegate"] = delegate
    return out


def _static_cpu(node: Any) -> bool:
    t = node.target or ""
    return t in NOT_SUPPORTED or t in TO_BE_IMPLEMENTED or t not in NODE_VISITORS


def qnn_delegation(artifact: str, method: str | None = None) -> QnnDelegation | None:
    """Per-node delegation of a QNN program (ETRecord), None when it has no QnnBackend delegate.

    The lowered view says which delegate took a node, but QNN int8 programs renumber debug handles when
    they fold quantize/dequantize pairs, so the ETRecord's handle maps cannot be trusted to say which
    nodes went to the NPU. The support check is replayed on the recorded graph instead: an op QNN has no
    builder for stays on the CPU, with the quantize/dequantize next to it and the ``getitem`` reading it.
    """
    from etlens.analysis.delegation import delegation_graph

    lowered = delegation_graph(os.fspath(artifact), method=method)
    where: dict[str, tuple[str, int]] = {}
    for n in lowered.nodes:
        if n.kind == "delegate" and n.delegate is not None and n.delegate.inner is not None:
            for m in n.delegate.inner.nodes:
                where.setdefault(m.name, (n.delegate.backend_id, n.delegate.index))
    if not any(b.lower().startswith("qnn") for b, _ in where.values()):
        return None
    graph = delegation_graph(os.fspath(artifact), method=method, etrecord_view="recorded")
    ops = [n for n in graph.nodes if n.kind == "op"]
    by_name = {n.name: n for n in ops}
    cpu = {n.name for n in ops if _static_cpu(n) and (n.target or "") != "getitem"}
    users: dict[str, list[str]] = {}
    for n in ops:
        for i in n.inputs or ():
            users.setdefault(str(getattr(i, "name", i)).split(":")[0], []).append(n.name)
    for n in ops:  # boundary (de)quantize and getitem of a CPU op run on the CPU with it
        t = n.target or ""
        srcs = [str(getattr(i, "name", i)).split(":")[0] for i in n.inputs or ()]
        if t == "getitem" and any(x in cpu for x in srcs):
            cpu.add(n.name)
        elif any(q in t for q in _QDQ) and (any(x in cpu for x in srcs)
                                            or any(u in cpu for u in users.get(n.name, ()))):
            cpu.add(n.name)
    out = QnnDelegation()
    qnn_id = next(b for b, _ in where.values() if b.lower().startswith("qnn"))
    for n in ops:
        if n.name in cpu:
            out.nodes.append(_row(n, None, None))
        else:
            backend, index = where.get(n.name, (qnn_id, None))
            out.nodes.append(_row(n, backend, index))
    for n in lowered.nodes:  # reads of delegate outputs exist only in the lowered program
        if n.kind == "op" and n.name not in by_name and (n.target or "") == "getitem":
            out.nodes.append(_row(n, None, None))
    return out


def estimates(artifact: str, method: str | None = None) -> QnnDelegation | None:
    """The hook ``etlens delegation`` calls for an ETRecord: its QNN node table, None for other programs."""
    if not str(artifact).endswith(".etrecord"):
        return None
    return qnn_delegation(artifact, method=method)
