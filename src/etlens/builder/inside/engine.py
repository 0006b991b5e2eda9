"""Lower, run and compare: the values the backend's kernels compute inside each delegate.

:func:`inside_delegates` is the Python API behind ``etlens gap --model … --inside-delegates``:

1. the float model is exported and run in torch, keeping every node's value (the end-to-end
   reference);
2. with ``quantize=True`` the model is pt2e-quantized once with the backend's quantizer
   (:func:`etlens.builder.pipeline.quantize_pt2e`, the shared step);
3. the *production* program is lowered and run as is (one plain lower + run cycle: the time
   anchor and the observer-effect baseline);
4. the *instrumented* program — the same graph returning every exposable value as an extra output
   (:mod:`etlens.builder.inside.graph`) — is lowered with the same partitioner and run; each extra
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

All lowering and running happens in one child process, a
:class:`~etlens.builder.worker.Worker` (``import torch`` + executorch paid once for every
cycle; a native abort fails a cycle, never the user's process). Given a
:class:`~etlens.builder.session.BuildSession` (``session=``, as ``etlens report`` does), the float
export, the quantized module and the worker are the session's: nothing is exported, quantized or
started again. The worker records each program
output's edge name at partition time, so a backend error naming a node ("Output node
'aten__softmax_default' is already in the inputs") maps to the exposure to drop. The name is
checked by the next build: when it fails naming the same node again, the name pointed at an
innocent value (int8 programs: XNNPACK's passes rebuild the delegate's subgraph and renumber its
nodes), which is taken back, and the exposures are split in halves instead.

Example::

    from etlens.demos import get_demo
    from etlens.builder.inside import inside_delegates

    model, inputs = get_demo("mlp")
    res = inside_delegates(model, inputs, quantize=True, metric="SNR", threshold=20)
    res.first_divergence["module_path"], res.to_dict()
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from ...model.spans import span
from ...errors import EtlensError
from ..inputs import args_for
from ..toolchain import export
from .graph import Exposure, capture, instrument, plan, value_of
from .result import InsideResult

__all__ = ["inside_delegates", "prepare", "rethreshold", "METRICS"]

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
    """Lower + run cycles in one :class:`~etlens.builder.worker.Worker` child, counted, timed, with a bar.

    Each cycle exports the graph here (torch only), saves it, and has the worker lower it for the
    backend and run it once (no ETRecord, no ETDump: the values come back as program outputs). The
    worker pays ``import torch`` + executorch once for all cycles; a native abort fails one cycle
    (an :class:`~etlens.errors.EtlensError`), never this process.
    """

    def __init__(self, backend: Any, inputs: tuple, bar: Any, *, quantized: bool, worker: Any) -> None:
        self.backend, self.inputs, self.bar, self.quantized = backend, inputs, bar, quantized
        self.count, self.seconds, self.each = 0, 0.0, []
        self.dir = tempfile.mkdtemp(prefix="etlens-inside-")
        self.worker = worker  # a session's (or the race's second) child: it outlives these cycles
        #: ``id(graph module) -> ExportedProgram`` exported ahead of time (:func:`prepare`)
        self.ready: dict[int, Any] = {}

    def __call__(self, gm: Any, label: str) -> tuple[list, list[tuple[bool, str | None, int | None]]]:
        """Lower ``gm`` and run it once; return ``(flat outputs, where each output was computed)``.

        ``where``: per output ``(inside a delegate, backend id, delegate index)``. A failure raises
        the worker's :class:`~etlens.builder.worker.NativeStageError`, whose ``details`` name the
        program's outputs as the backend's error messages do.
        """
        import torch

        self.bar.set_postfix_str(label)
        start = time.perf_counter()
        self.count += 1
        try:
            try:
                with span("inside/export"):
                    ep = self.ready.pop(id(gm), None) or export(gm, args_for(gm, self.inputs))
            except Exception as exc:  # noqa: BLE001 - export errors come in many types
                raise EtlensError(f"inside-delegates: torch.export of the {label} failed ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''})") from exc
            path = os.path.join(self.dir, f"c{self.count}.pt2")
            with span("inside/save program"):
                torch.export.save(ep, path)
            pte = os.path.join(self.dir, f"c{self.count}.pte")
            with span("inside/lower + run (waiting for the child)"):
                info = self.worker.lower(path, pte, backend=self.backend.name, describe=True,
                                         quantized=self.quantized)
                outs = self.worker.run(pte, self.inputs, runs=1, quantized=self.quantized)
            os.remove(path)
            os.remove(pte)
        finally:
            self.each.append(round(time.perf_counter() - start, 3))
            self.seconds += self.each[-1]
            self.bar.update(1)
        where = [(o.get("backend") is not None, o.get("backend"), o.get("delegate")) for o in info.get("outputs", [])]
        return _flat(outs), where

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def _metrics(comparators: list, ref: Any, out: Any) -> dict[str, float]:
    vals: dict[str, float] = {}
    for c in comparators:
        try:
            vals[c.name] = float(c.element_compare(ref, out))
        except Exception as exc:  # noqa: BLE001 - a custom comparator failing on one pair
            vals[c.name] = float("nan")
            vals.setdefault("errors", str(exc))  # type: ignore[arg-type]
    return vals


def _named_in_error(exc: Exception, exposures: list[Exposure]) -> list[Exposure]:
    """The exposures whose program output the backend's error names, mapped exactly.

    A backend names the node it refuses by its edge dialect name (XNNPACK: "Output node
    'aten__softmax_default' is already in the inputs"). The worker recorded, at partition time,
    each program output's edge name and its inputs' names (``exc.details``): an exposure is named
    when its output is the named node, or the value a ``dequantize`` output exposes (the int8
    values leave through one). A named node that is no exposure's output (a value the exposures
    only disturb) names nothing: the caller then splits the exposures in halves, which never drops
    an innocent value. Known limit: the backend names the node as the delegate's subgraph does,
    and torch.fx renumbers names there (GPT-2's ``aten_add_tensor_1`` is refused as
    ``aten_add_tensor``): a name no output carries is then matched without its counter, but only
    when a single exposure has that base name (MobileViT's second ``softmax``); otherwise it names
    nothing (halving). A renumbered name can equal another exposure's (int8 ViT: XNNPACK's passes
    rebuild the subgraph); :func:`_build` then sees the next build fail with the same name and takes
    the exposure back.
    """
    outputs = (getattr(exc, "details", {}) or {}).get("outputs") or []
    names = _error_names(exc)
    named: list[Exposure] = []
    by_base: dict[str, list[Exposure]] = {}
    for e in exposures:
        rec = outputs[e.output_index] if 0 <= e.output_index < len(outputs) else {}
        via = rec.get("args", [])[:1] if "dequantize" in rec.get("target", "") else []
        if names & {rec.get("name"), *via}:
            named.append(e)
        for n in {rec.get("name"), *via} - {None}:
            by_base.setdefault(_base(n), []).append(e)
    if named:
        return named
    # the subgraph renumbered the name: trust it only when one exposure has that base name
    for n in sorted(names):
        if len(by_base.get(_base(n), [])) == 1:
            named.append(by_base[_base(n)][0])
    return named


def _error_names(exc: Exception) -> set[str]:
    """The quoted node names in a backend's error message (``'aten__softmax_default'``)."""
    import re

    return set(re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", str(exc)))


def _base(name: str) -> str:
    """``aten__softmax_default_1`` -> ``aten__softmax_default`` (torch.fx's counter dropped)."""
    import re

    return re.sub(r"_\d+$", "", name)


def _build(cycles: _Cycles, src: Any, exposures: list[Exposure], failed: list[dict],
           instrumented: tuple | None = None, suspect: tuple | None = None) -> list[tuple]:
    """Lower + run with ``exposures`` exposed; on failure drop what the error names, else split in halves.

    Returns ``[(exposures, instrumented graph, n_original_outputs, outputs, where)]`` for every
    build that worked; exposures that fail alone (or that the backend's error points at, see
    :func:`_named_in_error`) go to ``failed`` with the error and how they were identified.
    ``suspect`` is ``(error names, exposures dropped for them, the build's exposures before)`` when
    this build retries without what the previous error named: failing with the same names again
    proves the names pointed at the wrong values, which come back, and that build's exposures are
    split in halves instead.
    """
    gm, n_orig = instrumented if instrumented is not None else instrument(src, exposures)
    try:
        outs, where = cycles(gm, f"instrumented build ({len(exposures)} values)")
        return [(list(exposures), gm, n_orig, outs, where)]
    except EtlensError as exc:  # lowering/running refused: isolate the culprit
        names = _error_names(exc)
        if suspect is not None and names and names == suspect[0]:
            del failed[-len(suspect[1]):]  # appended just before this build: innocent after all
            before = suspect[2]
            half = len(before) // 2
            return _build(cycles, src, before[:half], failed) + _build(cycles, src, before[half:], failed)
        first_line = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        named = _named_in_error(exc, exposures) if len(exposures) > 1 else []
        if len(exposures) == 1 or named:
            how = "alone" if len(exposures) == 1 else "named by the error"
            for e in (named or exposures):
                failed.append({"node": e.node, "aot_ops": e.ops, "error": f"{type(exc).__name__}: {first_line}",
                               "identified": how})
            rest = [e for e in exposures if e not in named]
            return _build(cycles, src, rest, failed, suspect=(names, named, list(exposures))) if named and rest else []
        half = len(exposures) // 2
        return _build(cycles, src, exposures[:half], failed) + _build(cycles, src, exposures[half:], failed)


def inside_delegates(model: Any, inputs: tuple, *, backend: str | Any = "xnnpack", quantize: bool = False,
                     metric: str = "MSE", threshold: float | None = None, bisect: bool = False,
                     comparators: list | None = None, calibration: list | None = None,
                     progress: bool | None = None, observe: bool = True, session: Any = None,
                     prepared: dict | None = None, worker: Any = None, verbose: bool = False) -> InsideResult:
    """Per-op values inside each delegate of ``model`` lowered for ``backend``, against the float model.

    Args:
        model: an ``nn.Module``; ``inputs``: its example inputs (a tuple of tensors).
        backend: a registered backend name or :class:`~etlens.builder.backends.BackendConfig`.
        quantize: pt2e-quantize with the backend's quantizer first (``calibration``: input tuples).
        metric / threshold: the metric of each row's ``gap`` and the first-divergence threshold.
        bisect: also confirm the first crossing with a bisect of single-value builds (needs
            ``threshold``).
        comparators: extra :class:`~etlens.analysis.comparators.NumericalComparatorBase` instances
            whose values are added to every row's ``metrics``.
        progress: show a bar over the lower + run cycles (default: when stderr is a terminal).
        observe: also lower + run the production program (the observer-effect baseline and the
            time anchor); ``False`` saves that cycle.
        session: a :class:`~etlens.builder.session.BuildSession` of this model, backend and
            quantization: its export, quantized module and worker child are reused.
        prepared: :func:`prepare`'s result for ``session`` (computed while the session's child
            lowered): the float reference values and the exported instrumented program are reused.
        worker: the :class:`~etlens.builder.worker.Worker` whose child lowers and runs the builds
            (default: ``session``'s).
        verbose: show the worker child's log (without ``session``).

    Without ``session`` a :class:`~etlens.builder.session.BuildSession` of ``model`` is made for the
    call (its export, quantization and child), so every build goes through a session.
    """
    from ...analysis.comparators import get_comparator
    from ..session import BuildSession

    if bisect and threshold is None:
        raise EtlensError("--bisect needs --fail-on-gap: the bisect looks for the first value crossing it")
    primary = get_comparator(metric)
    cmps = [get_comparator(m) for m in METRICS] + [get_comparator(c) for c in (comparators or [])]
    if primary.name not in {c.name for c in cmps}:
        cmps.append(primary)
    own = session is None
    if own:  # the one way a model is exported, quantized, lowered and run: a session of its own
        model = model.eval() if hasattr(model, "eval") else model
        session = BuildSession(model, inputs, name=type(model).__name__, backend=backend, quantize=quantize,
                               calibration=calibration, verbose=verbose)
    try:
        return _inside(session, cmps, primary, threshold, bisect, progress, observe, prepared or {}, worker)
    finally:
        if own:
            session.close()


def _inside(session: Any, cmps: list, primary: Any, threshold: float | None, bisect: bool, progress: bool | None,
            observe: bool, prepared: dict, worker: Any) -> InsideResult:
    from ..._progress import progress as bar

    cfg, quantize = session.config, session.quantize
    if session.in_process:  # a session's worker child checks it (no ExecuTorch import here)
        cfg.check_available()
    inputs = session.inputs  # nested (x, (h0, c0)) kept: export takes it; instrumented builds take it flat
    if "float_gm" in prepared:
        float_gm = prepared["float_gm"]
    else:
        try:
            float_gm = session.float_module()
        except EtlensError:
            raise
        except Exception as exc:  # noqa: BLE001 - export errors come in many types
            raise EtlensError(f"inside-delegates: torch.export failed on the model ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}); the model must be exportable") from exc
    with span("inside/float reference"):
        float_values = prepared["float_values"] if "float_values" in prepared else capture(float_gm, inputs)
    handle_of = {n.name: i + 1 for i, n in enumerate(n for n in float_gm.graph.nodes if n.op == "call_function")}
    src = session.quantized_module if quantize else float_gm
    exposures = prepared["exposures"] if "exposures" in prepared else plan(src, set(handle_of) if quantize else None)
    if not exposures:
        raise EtlensError("inside-delegates: the model has no floating-point op whose value can be exposed")

    probes = max(1, len(exposures)).bit_length() + 1 if bisect else 0
    pbar = bar(total=1 + int(observe) + probes, desc="inside delegates", unit="lower+run", enabled=progress)
    if worker is None:
        worker = session.worker
    cycles = _Cycles(cfg, inputs, pbar, quantized=quantize, worker=worker)
    try:
        prod_outs = cycles(src, "production program")[0] if observe else None
        plain_seconds = cycles.seconds if observe else None
        failed: list[dict] = []
        instrumented = prepared.get("instrumented")
        if instrumented is not None and prepared.get("exported") is not None:
            cycles.ready[id(instrumented[0])] = prepared["exported"]
        builds = _build(cycles, src, exposures, failed, instrumented)
        with span("inside/rows"):
            rows = _rows(builds, inputs, float_values, handle_of, cmps, primary, threshold, quantize)
        result = InsideResult(metric=primary.name, threshold=threshold, backend=cfg.name, quantized=quantize,
                              rows=rows)
        result.first_divergence = _first(rows)
        if prod_outs is not None:
            result.observer_effect = _observer(builds, prod_outs, float_gm, inputs, cmps, primary)
        result.method = {
            "name": "instrumented-outputs", "cycles": cycles.count, "builds": len(builds),
            "instrumented_seconds": cycles.seconds - (plain_seconds or 0.0), "plain_seconds": plain_seconds,
            "exposed": sum(len(b[0]) for b in builds), "unexposed": failed, "cycle_seconds": cycles.each,
            "exact": "values are the backend's outputs for each exposed op; fusions across an exposed value "
                     "are split (see observer_effect)",
        }
        if bisect:
            from .bisect import bisect_first_crossing

            result.bisect = bisect_first_crossing(cycles, src, exposures, rows, float_values, primary, threshold,
                                                  quantize)
            result.method["cycles"] = cycles.count
    finally:
        cycles.close()
        pbar.close()
    return result


def prepare(session: Any) -> dict[str, Any]:
    """What :func:`inside_delegates` computes from ``session``'s export alone, ahead of the build.

    The float reference values, the exposures, the instrumented graph and its export do not depend
    on the production lowering: ``report_from_model`` computes them in a thread while the session's
    child lowers and runs (this process only waits then) and passes them as ``prepared=``. An
    error here is left for :func:`inside_delegates` to raise (it then computes everything itself).
    """

    out: dict[str, Any] = {}
    try:
        inputs = session.inputs
        out["float_gm"] = float_gm = session.float_module()
        out["float_values"] = capture(float_gm, inputs)
        handle_of = {n.name: i + 1 for i, n in enumerate(n for n in float_gm.graph.nodes if n.op == "call_function")}
        src = session.quantized_module if session.quantize else float_gm
        out["exposures"] = exposures = plan(src, set(handle_of) if session.quantize else None)
        if exposures:
            out["instrumented"] = instrument(src, exposures)
            gm = out["instrumented"][0]
            out["exported"] = export(gm, args_for(gm, inputs))
    except Exception:  # noqa: BLE001 - inside_delegates recomputes and reports
        return {}
    return out


def _rows(builds: list[tuple], inputs: tuple, float_values: dict, handle_of: dict, cmps: list, primary: Any,
          threshold: float | None, quantized: bool) -> list[dict]:
    import torch

    rows: list[tuple[int, dict]] = []
    for exposures, gm, _n, outs, where in builds:
        with torch.no_grad():
            ref_outs = _flat(gm(*args_for(gm, inputs)))
        for e in exposures:
            idx = e.output_index
            value = value_of(e, outs)
            inside, backend_id, delegate = where[idx] if idx < len(where) else (False, None, None)
            float_ref = float_values.get(e.float_node) if e.float_node else None
            metrics: dict[str, Any] = {}
            if float_ref is not None:
                metrics["float"] = _metrics(cmps, float_ref, value)
            if quantized:
                metrics["qdq_simulated"] = _metrics(cmps, value_of(e, ref_outs), value)
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
    """Graph order of the exposure (set by :func:`~etlens.builder.inside.graph.plan`)."""
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
