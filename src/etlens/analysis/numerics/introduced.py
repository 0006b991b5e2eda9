"""Introduced vs accumulated quantization error, per quantized cluster of a pt2e graph.

The gap table compares every op's output with the float reference *after* everything before it ran
quantized: that is the **accumulated** error, and in an int8 model it grows along the graph, so the
op with the largest gap is seldom the op that did the damage. This module separates what each op
brings in on its own (rknn-toolkit2's "single" vs "entire" error, TFLite's quantization debugger):

* the converted pt2e module (QDQ graph: ``quantize → dequantize`` around the ops that will run in
  int8) and the float module are matched node by node (pt2e keeps the compute nodes' names);
* compute nodes joined by direct edges, with no ``quantize``/``dequantize`` between them, form a
  **cluster** — what a backend runs as one int8 kernel (``linear`` + ``relu`` with one output
  quantization); a cluster belongs to the module of its weighted op (else of its first op);
* each cluster is re-run on the float reference's own inputs, passed through the cluster's input
  quantization, once quantized (int8 weights, output quantization) and once in float (float
  weights, no output quantization): the difference is the cluster's **own error**, free of
  everything upstream. Its input quantization belongs to the producer (it is the producer's output
  quantization), except at the model inputs;
* **introduced** error: the float model run with only that cluster's own error added (every other
  op in float), measured at the model outputs as a noise-to-signal ratio. It ranks clusters by the
  damage they do where it matters, so a layer whose range int8 cannot hold ranks first even when
  its own output looks fine relative to its (outlier-dominated) magnitude;
* ``introduced_local``: the own error relative to the cluster's own output; ``accumulated``: the
  cluster's output in the fully quantized run vs float, relative to its own output.

All of it runs in PyTorch on the two graph modules (no lowering, milliseconds per cluster).

Example::

    from etlens.analysis.numerics.introduced import introduced_errors
    rows = introduced_errors(float_gm, quantized_gm, inputs)      # one row per cluster, worst first
    rows[0].module_path, rows[0].introduced, rows[0].accumulated
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from ...errors import EtlensError

__all__ = ["ClusterError", "introduced_errors", "attach_introduced", "cluster_count", "is_qdq_node", "nsr", "snr_db",
           "float_tensors"]

_QDQ_NS = "quantized_decomposed"


def is_qdq_node(node: Any) -> bool:
    """A quantize / dequantize / choose_qparams node (or a ``getitem`` of one): quantization plumbing."""
    if node.op != "call_function":
        return False
    target = node.target
    if getattr(target, "namespace", None) == _QDQ_NS:
        return True
    name = getattr(target, "__name__", "")
    if name == "getitem" and node.args and hasattr(node.args[0], "op"):
        return is_qdq_node(node.args[0])
    return False


def _is_compute(node: Any) -> bool:
    return node.op == "call_function" and not is_qdq_node(node)


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def float_tensors(value: Any) -> list[Any]:
    """Every floating-point tensor in ``value`` (a tensor, or nested lists/tuples of them), in order."""
    return _tensors(value)


def nsr(approx: Any, ref: Any) -> float:
    """Noise-to-signal ratio ``sum((approx - ref)^2) / sum(ref^2)`` over every float tensor in the two values."""
    a, r = _tensors(approx), _tensors(ref)
    if not r or len(a) != len(r):
        return 0.0
    noise = sum(float(((x.detach().double() - y.detach().double()) ** 2).sum())
                for x, y in zip(a, r) if x.shape == y.shape)
    signal = sum(float((y.detach().double() ** 2).sum()) for y in r)
    if signal == 0.0:
        return 0.0 if noise == 0.0 else math.inf
    return noise / signal


def snr_db(approx: Any, ref: Any) -> float:
    """Signal-to-noise ratio in dB of ``approx`` against ``ref`` (``inf`` when equal)."""
    ratio = nsr(approx, ref)
    return math.inf if ratio == 0.0 else (-math.inf if math.isinf(ratio) else -10.0 * math.log10(ratio))


@dataclass
class ClusterError:
    """One quantized cluster: its ops, module, own and inherited error.

    ``introduced`` is the noise-to-signal ratio at the model outputs with only this cluster's own
    error (the ranking key); ``introduced_local`` the own error relative to the cluster's output;
    ``accumulated`` the fully quantized run's error at the cluster's output.
    """

    rank: int
    module_path: str
    module_type: str
    op: str
    nodes: list[str]
    introduced: float
    introduced_local: float
    accumulated: float
    introduced_snr_db: float
    accumulated_snr_db: float
    quantized: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("extra")
        for k, v in list(out.items()):
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = None
        return out


def _module_of(node: Any) -> tuple[str, str]:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, mtype = list(stack.values())[-1]
    mtype = mtype if isinstance(mtype, str) else getattr(mtype, "__name__", str(mtype))
    return str(path), mtype.rsplit(".", 1)[-1]


def _clusters(gm: Any) -> list[list[Any]]:
    """Compute nodes grouped by direct compute→compute edges (union-find), in graph order; a group
    never holds two weighted ops."""
    parent: dict[Any, Any] = {}

    def find(n: Any) -> Any:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    nodes = [n for n in gm.graph.nodes if _is_compute(n)]
    weighted: set[Any] = set()  # roots whose group holds a weighted op (linear, conv, ...)
    for n in nodes:
        parent[n] = n
        if _has_weight(n):
            weighted.add(n)
    for n in nodes:
        for a in n.all_input_nodes:
            if a in parent:
                ra, rn = find(a), find(n)
                # one weighted op per cluster: float glue between two of them (a residual add, a
                # layer norm the quantizer leaves in float) must not fuse two layers into one row
                if ra is not rn and not (ra in weighted and rn in weighted):
                    parent[rn] = ra
                    if rn in weighted:
                        weighted.add(ra)
    groups: dict[Any, list[Any]] = {}
    for n in nodes:
        groups.setdefault(find(n), []).append(n)
    return list(groups.values())


def _has_weight(node: Any) -> bool:
    """The node takes a parameter (a ``get_attr``, possibly through a dequantize)."""
    for a in node.all_input_nodes:
        cur = a
        while cur.op == "call_function" and is_qdq_node(cur) and cur.all_input_nodes:
            cur = cur.all_input_nodes[0]
        if cur.op == "get_attr":
            return True
    return False


def _zip_args(qa: Any, fa: Any, fn: Callable[[Any, Any], Any]) -> Any:
    if isinstance(qa, (list, tuple)) and isinstance(fa, (list, tuple)) and len(qa) == len(fa):
        return type(qa)(_zip_args(x, y, fn) for x, y in zip(qa, fa))
    return fn(qa, fa)


class _Runner:
    """Values of a float and a quantized graph module that share compute-node names."""

    def __init__(self, float_gm: Any, quant_gm: Any, inputs: tuple):
        self.fgm, self.qgm = float_gm, quant_gm
        self.inputs = inputs
        self.fvals = self._record(float_gm)
        self.qvals = self._record(quant_gm)
        self.fnodes = {n.name: n for n in float_gm.graph.nodes}

    def _record(self, gm: Any, override: dict[str, Callable[[Any], Any]] | None = None) -> dict[str, Any]:
        import torch

        values: dict[str, Any] = {}

        class _Rec(torch.fx.Interpreter):
            def run_node(self, n: Any) -> Any:
                out = super().run_node(n)
                if override and n.name in override:
                    out = override[n.name](out)
                values[n.name] = out
                return out

        with torch.no_grad():
            out = _Rec(gm).run(*self.inputs)
        values["__output__"] = out
        return values

    def attr(self, gm: Any, target: str) -> Any:
        obj = gm
        for part in target.split("."):
            obj = getattr(obj, part)
        return obj

    def boundary(self, node: Any, inside: set[str], inner: dict[str, Any], memo: dict[str, Any]) -> Any:
        """The quantized graph's value of ``node`` with every compute producer outside the cluster
        replaced by its float value (the QDQ plumbing in between re-applied)."""
        if not hasattr(node, "op"):
            return node
        if node.name in inside:
            return inner[node.name]
        if node.name in memo:
            return memo[node.name]
        if node.op == "get_attr":
            value = self.attr(self.qgm, node.target)
        elif node.op == "placeholder" or _is_compute(node):
            value = self.fvals.get(node.name, self.qvals.get(node.name))
        elif is_qdq_node(node):
            import torch

            args = torch.fx.node.map_arg(node.args, lambda a: self.boundary(a, inside, inner, memo))
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: self.boundary(a, inside, inner, memo))
            value = node.target(*args, **kwargs)
        else:
            value = self.qvals.get(node.name)
        memo[node.name] = value
        return value

    @staticmethod
    def _leaf(node: Any) -> Any:
        cur = node
        while hasattr(cur, "op") and is_qdq_node(cur) and cur.all_input_nodes:
            cur = cur.all_input_nodes[0]
        return cur

    def own_error(self, cluster: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(quantized, float)`` values of the cluster's outputs on identical (quantized) float inputs."""
        import torch

        inside = {n.name for n in cluster}
        qenv: dict[str, Any] = {}
        fenv: dict[str, Any] = {}
        memo: dict[str, Any] = {}
        with torch.no_grad():
            for n in cluster:
                fn = self.fnodes.get(n.name)

                def q_arg(a: Any) -> Any:
                    return self.boundary(a, inside, qenv, memo) if hasattr(a, "op") else a

                qargs = torch.fx.node.map_arg(n.args, q_arg)
                qkwargs = torch.fx.node.map_arg(n.kwargs, q_arg)
                qenv[n.name] = n.target(*qargs, **qkwargs)
                if fn is None:
                    fenv[n.name] = qenv[n.name]
                    continue

                def f_arg(qa: Any, fa: Any) -> Any:
                    if not hasattr(qa, "op"):
                        return qa
                    if qa.name in inside:
                        return fenv[qa.name]
                    leaf = self._leaf(qa)
                    if leaf.op == "get_attr" and hasattr(fa, "op"):
                        return self.fvals.get(fa.name) if fa.name in self.fvals else self.attr(self.fgm, fa.target)
                    return q_arg(qa)

                fargs = _zip_args(n.args, fn.args, f_arg)
                fkwargs = {k: _zip_args(v, fn.kwargs.get(k), f_arg) for k, v in n.kwargs.items()}
                fenv[n.name] = fn.target(*fargs, **fkwargs)
            outs = [n for n in cluster if any(u.name not in inside for u in n.users)]
            qout: dict[str, Any] = {}
            fout: dict[str, Any] = {}
            for o in outs:
                fout[o.name] = fenv[o.name]
                qout[o.name] = self._output_qdq(o, inside, qenv, memo)
        return qout, fout

    def _output_qdq(self, node: Any, inside: set[str], qenv: dict[str, Any], memo: dict[str, Any]) -> Any:
        """The cluster output as its consumers see it: through its quantize → dequantize, if any."""
        for u in node.users:
            if is_qdq_node(u):
                for d in u.users:
                    if is_qdq_node(d) and "dequantize" in str(d.target):
                        return self.boundary(d, inside, qenv, dict(memo))
        return qenv[node.name]


def introduced_errors(float_gm: Any, quant_gm: Any, inputs: Iterable[Any], *,
                      min_share: float = 0.0) -> list[ClusterError]:
    """Per quantized cluster: introduced, local and accumulated error; worst introduced first.

    Args:
        float_gm: the float reference (``exported.module()`` of the program pt2e started from).
        quant_gm: the converted pt2e module (``convert_pt2e`` output) of the same export.
        inputs: the example inputs (a tuple).
        min_share: leave out clusters whose introduced error is below this share of the largest.

    Raises:
        EtlensError: the two modules share no compute node (not the same export), or a run failed.
    """
    inputs = tuple(inputs)
    try:
        runner = _Runner(float_gm, quant_gm, inputs)
    except Exception as exc:  # noqa: BLE001 - the user's graph: say which stage
        raise EtlensError(f"introduced error: running the float or the quantized graph failed: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
    ref_out = runner.fvals["__output__"]
    clusters = _clusters(quant_gm)
    shared = [c for c in clusters if any(n.name in runner.fnodes for n in c)]
    if not shared:
        raise EtlensError("introduced error: the quantized graph shares no op with the float graph; give the "
                          "converted module of the same export (quantize_pt2e(..., exported=ep))")
    rows: list[ClusterError] = []
    for cluster in shared:
        touches_q = any(is_qdq_node(a) for n in cluster for a in n.all_input_nodes) or any(
            is_qdq_node(u) for n in cluster for u in n.users)
        if not touches_q:
            continue
        try:
            qout, fout = runner.own_error(cluster)
        except Exception:  # noqa: BLE001 - an op the per-cluster replay cannot run: skip it, keep the rest
            continue
        deltas = {}
        for name, fv in fout.items():
            qv = qout[name]
            if _tensors(qv) and _tensors(fv) and all(a.shape == b.shape for a, b in zip(_tensors(qv), _tensors(fv))):
                deltas[name] = (qv, fv)
        if not deltas:
            continue
        local = nsr([q for q, _ in deltas.values()], [f for _, f in deltas.values()])

        def _add(delta: tuple[Any, Any]) -> Callable[[Any], Any]:
            q, f = delta
            return lambda out: out + (q - f) if hasattr(out, "shape") and out.shape == q.shape else out

        override = {name: _add(d) for name, d in deltas.items()}
        single = runner._record(float_gm, override)["__output__"]
        introduced = nsr(single, ref_out)
        acc_q = [runner.qvals.get(n) for n in deltas]
        acc_f = [runner.fvals.get(n) for n in deltas]
        accumulated = nsr(acc_q, acc_f)
        anchor = next((n for n in cluster if _has_weight(n)), cluster[0])
        path, mtype = _module_of(anchor)
        rows.append(ClusterError(
            rank=0, module_path=path, module_type=mtype, op=str(getattr(anchor.target, "__name__", anchor.target)),
            nodes=[n.name for n in cluster], introduced=introduced, introduced_local=local, accumulated=accumulated,
            introduced_snr_db=_db(introduced), accumulated_snr_db=_db(accumulated)))
    rows.sort(key=lambda r: -r.introduced)
    top = rows[0].introduced if rows else 0.0
    if min_share > 0 and top > 0:
        rows = [r for r in rows if r.introduced >= min_share * top]
    for i, r in enumerate(rows):
        r.rank = i + 1
    return rows


def _db(ratio: float) -> float:
    return math.inf if ratio == 0.0 else (-math.inf if math.isinf(ratio) else -10.0 * math.log10(ratio))


def cluster_count(quant_gm: Any) -> int:
    """How many compute clusters the converted pt2e module has (each one re-runs the float model once)."""
    return len(_clusters(quant_gm))


def attach_introduced(rows: list[dict[str, Any]], clusters: list[ClusterError], *,
                      key: str = "aot_ops") -> int:
    """Put each cluster's introduced error on the gap rows that hold its ops; return how many rows got one.

    ``rows`` are gap rows (dicts, e.g. ``etlens gap --model … --quantize``'s) naming the quantized
    graph's compute nodes under ``key``; a row gets the cluster sharing most of its ops:
    ``introduced`` (noise-to-signal at the model outputs with only that cluster's own error),
    ``introduced_snr_db``, ``introduced_rank`` (1 = the worst culprit) and ``accumulated_nsr`` (the
    int8 run's error at the cluster's output, relative to it). Rows with no quantized cluster (ops
    left in float) get ``None`` in each.
    """
    by_node: dict[str, ClusterError] = {}
    for c in clusters:
        for name in c.nodes:
            by_node.setdefault(name, c)
    matched = 0
    for row in rows:
        counts: dict[int, tuple[int, ClusterError]] = {}
        for op in row.get(key) or []:
            c = by_node.get(op)
            if c is not None:
                n, _ = counts.get(id(c), (0, c))
                counts[id(c)] = (n + 1, c)
        best = max(counts.values(), key=lambda t: (t[0], t[1].introduced))[1] if counts else None
        row["introduced"] = best.introduced if best else None
        row["introduced_snr_db"] = (best.introduced_snr_db if best and math.isfinite(best.introduced_snr_db)
                                    else None)
        row["introduced_rank"] = best.rank if best else None
        row["accumulated_nsr"] = best.accumulated if best else None
        matched += best is not None
    return matched
