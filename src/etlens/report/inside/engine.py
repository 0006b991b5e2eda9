"""Lower, run and compare: the values the backend's kernels compute inside each delegate.

:func:`inside_delegates` is the Python API behind ``etlens gap --model … --inside-delegates``:

1. the float model is exported and run in torch, keeping every node's value (the end-to-end
   reference);
2. with ``quantize=True`` the model is pt2e-quantized once with the backend's quantizer
   (:func:`etlens.report.pipeline.quantize_pt2e`, the shared step);
3. the *production* program is lowered and run as is (one plain lower + run cycle: the time
   anchor and the observer-effect baseline);
4. the *instrumented* program — the same graph returning every exposable value as an extra output
   (:mod:`etlens.report.inside.graph`) — is lowered with the same partitioner and run; each extra
   output is the value the backend's kernels computed inside the delegate. Run in torch, the same
   instrumented graph gives the quantize-dequantize-simulated reference (kernel error alone);
5. rows pair every value with its references through the float graph's node names and debug
   handles; the first divergence is the earliest row crossing the threshold;
6. optionally (``bisect=True``) a bisect over the exposed values, each probe a build exposing one
   value only (the production fusions elsewhere intact), confirms the localisation in
   ``O(log N)`` cycles.

When a build with all exposures fails to lower or run, the exposures are split in halves and each
half is built on its own, down to single values; a value that cannot be exposed alone is listed in
``method["unexposed"]`` with the error.

All lowering and running goes through :func:`etlens.report.pipeline.lower` and
:func:`~etlens.report.pipeline.run_with_etdump` (no direct runtime calls here).

Example::

    from etlens.demos import get_demo
    from etlens.report.inside import inside_delegates

    model, inputs = get_demo("mlp")
    res = inside_delegates(model, inputs, quantize=True, metric="SNR", threshold=20)
    res.first_divergence["module_path"], res.to_dict()
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from ...errors import EtlensError
from .graph import Exposure, capture, instrument, plan
from .result import InsideResult

__all__ = ["inside_delegates", "rethreshold", "METRICS"]

#: every row carries these metrics for each reference (plus any custom comparators)
METRICS = ["MSE", "L1", "SNR", "cosine", "max_abs"]


def _flat(outputs: Any) -> list:
    import torch

    if isinstance(outputs, torch.Tensor):
        return [outputs]
    if isinstance(outputs, (list, tuple)):
        out: list = []
        for o in outputs:
            out.extend(_flat(o))
        return out
    if isinstance(outputs, dict):
        return _flat(list(outputs.values()))
    return [outputs]


class _Cycles:
    """Lower + run cycles, counted and timed, with a progress bar."""

    def __init__(self, backend: Any, inputs: tuple, bar: Any) -> None:
        self.backend, self.inputs, self.bar = backend, inputs, bar
        self.count, self.seconds = 0, 0.0
        self.dir = tempfile.mkdtemp(prefix="etlens-inside-")

    def __call__(self, gm: Any, label: str) -> tuple[list, Any]:
        """Lower ``gm`` and run it once; return ``(flat outputs, edge program manager)``."""
        from ..pipeline import lower, run_with_etdump

        self.bar.set_postfix_str(label)
        start = time.perf_counter()
        self.count += 1
        try:
            _ep, edge, et = lower(gm, self.inputs, quant=False, backend=self.backend)
            outs = run_with_etdump(et.buffer, self.inputs, 1, os.path.join(self.dir, f"c{self.count}.etdp"), None)
        finally:
            self.seconds += time.perf_counter() - start
            self.bar.update(1)
        return _flat(outs), edge


def _where(edge: Any) -> list[tuple[bool, str | None, int | None]]:
    """For each program output: ``(inside a delegate, backend id, delegate index)``."""
    gm = edge.exported_program().graph_module
    delegates = [n for n in gm.graph.nodes if n.op == "call_function" and "executorch_call_delegate" in str(n.target)]
    index = {n.name: i for i, n in enumerate(delegates)}
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    args = out_node.args[0]
    args = list(args) if isinstance(args, (list, tuple)) else [args]
    where = []
    for a in args:
        src = a.args[0] if getattr(a, "op", None) == "call_function" and a.args and \
            getattr(a.args[0], "name", None) in index else None
        if src is None:
            where.append((False, None, None))
            continue
        lowered = getattr(gm, src.args[0].target, None)
        where.append((True, str(getattr(lowered, "backend_id", "delegate")), index[src.name]))
    return where


def _metrics(comparators: list, ref: Any, out: Any) -> dict[str, float]:
    vals: dict[str, float] = {}
    for c in comparators:
        try:
            vals[c.name] = float(c.element_compare(ref, out))
        except Exception as exc:  # noqa: BLE001 - a custom comparator failing on one pair
            vals[c.name] = float("nan")
            vals.setdefault("errors", str(exc))  # type: ignore[arg-type]
    return vals


def _named_in_error(exc: Exception, exposures: list[Exposure], src: Any) -> list[Exposure]:
    """Exposures an edge-dialect node name in the error points at (``'aten_add_tensor_3'``,
    ``'quantized_decomposed_quantize_per_tensor_default_7'``).

    The backend names the node it refuses (XNNPACK: "Output node 'aten_add_tensor' is already in the
    inputs"). Edge names are ``aten_<op>_<overload>[_<n>]``: the ``n``-th node (0 without a suffix)
    calling ``aten.<op>.<overload>``; edge passes may drop earlier ones, so we take the first exposed
    such node at or after position ``n`` of the source graph. A wrong guess costs one more cycle and
    the same error, which then names the next one.
    """
    import re

    by_target: dict[str, list[str]] = {}
    for node in src.graph.nodes:
        if node.op == "call_function":
            by_target.setdefault(str(node.target).lower(), []).append(node.name)
    mine = {e.node: e for e in exposures}
    out: list[Exposure] = []
    for name in re.findall(r"'((?:aten|quantized_decomposed)_[A-Za-z0-9_]+)'", str(exc)):
        m = re.match(r"(aten|quantized_decomposed)_(.+?)_([a-z]+)(?:_(\d+))?$", name)
        if not m:
            continue
        nodes = by_target.get(f"{m.group(1)}.{m.group(2)}.{m.group(3)}", [])
        # edge passes only remove such nodes before it (int arithmetic, no-ops), so it is the k-th or later
        later = [mine[n] for n in nodes[int(m.group(4) or 0):] if n in mine and mine[n] not in out]
        out.extend(later[:1])
    return out


def _build(cycles: _Cycles, src: Any, exposures: list[Exposure], failed: list[dict]) -> list[tuple]:
    """Lower + run with ``exposures`` exposed; on failure drop what the error names, else split in halves.

    Returns ``[(exposures, instrumented graph, n_original_outputs, outputs, where)]`` for every
    build that worked; exposures that fail alone (or that the backend's error names) go to ``failed``.
    """
    gm, n_orig = instrument(src, exposures)
    try:
        outs, edge = cycles(gm, f"instrumented build ({len(exposures)} values)")
        return [(list(exposures), gm, n_orig, outs, _where(edge))]
    except Exception as exc:  # noqa: BLE001 - lowering/running errors of any kind: isolate the culprit
        first_line = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        named = _named_in_error(exc, exposures, src) if len(exposures) > 1 else []
        if len(exposures) == 1 or named:
            for e in (named or exposures):
                failed.append({"node": e.node, "aot_ops": e.ops, "error": f"{type(exc).__name__}: {first_line}"})
            rest = [e for e in exposures if e not in named]
            return _build(cycles, src, rest, failed) if named and rest else []
        half = len(exposures) // 2
        return _build(cycles, src, exposures[:half], failed) + _build(cycles, src, exposures[half:], failed)


def inside_delegates(model: Any, inputs: tuple, *, backend: str | Any = "xnnpack", quantize: bool = False,
                     metric: str = "MSE", threshold: float | None = None, bisect: bool = False,
                     comparators: list | None = None, calibration: list | None = None,
                     progress: bool | None = None, observe: bool = True) -> InsideResult:
    """Per-op values inside each delegate of ``model`` lowered for ``backend``, against the float model.

    Args:
        model: an ``nn.Module``; ``inputs``: its example inputs (a tuple of tensors).
        backend: a registered backend name or :class:`~etlens.passes.backends.BackendConfig`.
        quantize: pt2e-quantize with the backend's quantizer first (``calibration``: input tuples).
        metric / threshold: the metric of each row's ``gap`` and the first-divergence threshold.
        bisect: also confirm the first crossing with a bisect of single-value builds (needs
            ``threshold``).
        comparators: extra :class:`~etlens.analysis.comparators.NumericalComparatorBase` instances
            whose values are added to every row's ``metrics``.
        progress: show a bar over the lower + run cycles (default: when stderr is a terminal).
        observe: also lower + run the production program (the observer-effect baseline and the
            time anchor); ``False`` saves that cycle.
    """
    import torch

    from ..._progress import progress as bar
    from ...analysis.comparators import get_comparator
    from ...passes.backends import get_backend
    from ..pipeline import quantize_pt2e

    if bisect and threshold is None:
        raise EtlensError("--bisect needs --threshold: the bisect looks for the first value crossing it")
    cfg = get_backend("portable" if backend in (None, "", "none") else backend)
    cfg.check_available()
    primary = get_comparator(metric)
    cmps = [get_comparator(m) for m in METRICS] + [get_comparator(c) for c in (comparators or [])]
    if primary.name not in {c.name for c in cmps}:
        cmps.append(primary)
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    model = model.eval() if hasattr(model, "eval") else model

    try:
        float_gm = torch.export.export(model, inputs).module()
    except Exception as exc:  # noqa: BLE001 - export errors come in many types
        raise EtlensError(f"inside-delegates: torch.export failed on the model ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}); the model must be exportable") from exc
    float_values = capture(float_gm, inputs)
    handle_of = {n.name: i + 1 for i, n in enumerate(n for n in float_gm.graph.nodes if n.op == "call_function")}
    src = quantize_pt2e(model, inputs, backend=cfg, calibration=calibration) if quantize else float_gm
    exposures = plan(src, set(handle_of) if quantize else None)
    if not exposures:
        raise EtlensError("inside-delegates: the model has no floating-point op whose value can be exposed")

    probes = max(1, len(exposures)).bit_length() + 1 if bisect else 0
    pbar = bar(total=1 + int(observe) + probes, desc="inside delegates", unit="lower+run", enabled=progress)
    cycles = _Cycles(cfg, inputs, pbar)
    try:
        prod_outs = cycles(src, "production program")[0] if observe else None
        plain_seconds = cycles.seconds if observe else None
        failed: list[dict] = []
        builds = _build(cycles, src, exposures, failed)
        rows = _rows(builds, inputs, float_values, handle_of, cmps, primary, threshold, quantize)
        result = InsideResult(metric=primary.name, threshold=threshold, backend=cfg.name, quantized=quantize,
                              rows=rows)
        result.first_divergence = _first(rows)
        if prod_outs is not None:
            result.observer_effect = _observer(builds, prod_outs, float_gm, inputs, cmps, primary)
        result.method = {
            "name": "instrumented-outputs", "cycles": cycles.count, "builds": len(builds),
            "instrumented_seconds": cycles.seconds - (plain_seconds or 0.0), "plain_seconds": plain_seconds,
            "exposed": sum(len(b[0]) for b in builds), "unexposed": failed,
            "exact": "values are the backend's outputs for each exposed op; fusions across an exposed value "
                     "are split (see observer_effect)",
        }
        if bisect:
            from .bisect import bisect_first_crossing

            result.bisect = bisect_first_crossing(cycles, src, exposures, rows, float_values, primary, threshold,
                                                  quantize)
            result.method["cycles"] = cycles.count
    finally:
        pbar.close()
    return result


def _rows(builds: list[tuple], inputs: tuple, float_values: dict, handle_of: dict, cmps: list, primary: Any,
          threshold: float | None, quantized: bool) -> list[dict]:
    import torch

    rows: list[tuple[int, dict]] = []
    for exposures, gm, _n, outs, where in builds:
        with torch.no_grad():
            ref_outs = _flat(gm(*inputs))
        for e in exposures:
            idx = e.output_index
            value = outs[idx]
            inside, backend_id, delegate = where[idx] if idx < len(where) else (False, None, None)
            float_ref = float_values.get(e.float_node) if e.float_node else None
            metrics: dict[str, Any] = {}
            if float_ref is not None:
                metrics["float"] = _metrics(cmps, float_ref, value)
            if quantized:
                metrics["qdq_simulated"] = _metrics(cmps, ref_outs[idx], value)
            gap = metrics.get("float", {}).get(primary.name)
            kernel_gap = metrics.get("qdq_simulated", {}).get(primary.name)
            crosses = bool(threshold is not None and gap is not None and primary.crosses(gap, threshold))
            rows.append((_order(e), {
                "node": e.node, "aot_ops": list(e.ops), "op_targets": list(e.targets),
                "debug_handles": [handle_of[o] for o in e.ops if o in handle_of],
                "module_path": e.meta.get("module_path"), "source_line": e.meta.get("source_line"),
                "inside_delegate": inside, "backend": backend_id, "delegate_index": delegate,
                "reference_kind": "float" if float_ref is not None else "qdq_simulated",
                "gap": gap if gap is not None else kernel_gap, "kernel_gap": kernel_gap,
                "kernel_reference_kind": "qdq_simulated" if quantized else None,
                "metrics": metrics, "shape": list(getattr(value, "shape", ())), "stats": _stats(value),
                "crosses_threshold": crosses,
            }))
    rows.sort(key=lambda r: r[0])
    return [r for _, r in rows]


def _stats(value: Any) -> dict[str, float]:
    """min / max / mean / abs_max of the backend's value (the statistics upstream's tap reports too)."""
    import torch

    t = torch.as_tensor(value).detach().to(torch.float64)
    if t.numel() == 0:
        return {}
    return {"min": float(t.min()), "max": float(t.max()), "mean": float(t.mean()), "abs_max": float(t.abs().max())}


def _order(e: Exposure) -> int:
    """Graph order of the exposure (set by :func:`~etlens.report.inside.graph.plan`)."""
    return int(e.meta.get("order", 0))


def _first(rows: list[dict]) -> dict | None:
    for i, r in enumerate(rows):
        if r["crosses_threshold"]:
            return {"row": i, "node": r["node"], "aot_ops": r["aot_ops"], "module_path": r["module_path"],
                    "gap": r["gap"], "kernel_gap": r["kernel_gap"], "source_line": r["source_line"],
                    "debug_handles": r["debug_handles"], "inside_delegate": r["inside_delegate"],
                    "backend": r["backend"], "reference_kind": r["reference_kind"]}
    return None


def _observer(builds: list[tuple], prod_outs: list, float_gm: Any, inputs: tuple, cmps: list, primary: Any) -> dict:
    import torch

    with torch.no_grad():
        float_outs = _flat(float_gm(*inputs))
    worst: dict[str, Any] = {}
    for _e, _gm, n_orig, outs, _w in builds:
        for a, b in zip(prod_outs[:n_orig], outs[:n_orig]):
            m = _metrics(cmps, a, b)
            if not worst or m.get("max_abs", 0.0) >= worst.get("max_abs", 0.0):
                worst = m
    prod_vs_float = _metrics(cmps, float_outs[0], prod_outs[0]) if prod_outs and float_outs else {}
    return {"instrumented_vs_production": worst, "max_abs": worst.get("max_abs"),
            "identical": worst.get("max_abs") == 0.0, "production_vs_float": prod_vs_float,
            "metric": primary.name}



def rethreshold(result: InsideResult, threshold: float) -> InsideResult:
    """Set ``result``'s threshold after the fact: recompute ``crosses_threshold`` and the first divergence."""
    from ...analysis.comparators import get_comparator

    cmp = get_comparator(result.metric)
    result.threshold = threshold
    for r in result.rows:
        r["crosses_threshold"] = bool(r.get("gap") is not None and cmp.crosses(float(r["gap"]), threshold))
    result.first_divergence = _first(result.rows)
    return result
