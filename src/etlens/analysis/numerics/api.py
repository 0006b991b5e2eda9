"""Numerical debugger: where do the runtime's numbers drift from the reference, and by how much?

``calculate_numeric_gap`` runs the reference program stored in the ETRecord on its representative
inputs, pairs each reference output with the runtime's intermediate output (ETDump debug events)
through debug handles, and computes a distance per pair. The rows, columns and order are those of
``executorch.devtools.Inspector.calculate_numeric_gap``; the pairing is near-linear instead of
quadratic, metrics are not rounded, bf16/fp16 tensors work, and what could not be paired is
explained instead of silently dropped.

Usage (``etlens.Inspector`` delegates to these functions)::

    from etlens import Inspector
    insp = Inspector(etdump_path="run.etdp", etrecord="model.etrecord", debug_buffer_path="run.bin")
    df = insp.calculate_numeric_gap("SNR")        # one row per compared op group
    insp.explain_unpaired()                        # every op / event without a row, and why
    from etlens.analysis.numerics import first_divergence
    first_divergence(insp, threshold=1e-4, metric="MSE")  # earliest op (graph order) over the threshold

Or on the module level: ``calculate_numeric_gap(insp, "MSE")``. The heavy part (running the
reference) is done once per (reference graph, validation, memory) choice and cached on the
inspector; changing the metric only recomputes distances.

Deliberate differences from ExecuTorch (each has a test):

* runtime and reference tensors with the same number of elements but different shapes (the runtime
  logs the tensor before a free ``view``) are compared element by element in memory order;
  ExecuTorch broadcasts them, which raises (``(1, 8, 32)`` vs ``(1, 8, 4, 8)``) or, for shapes such
  as ``(8, 1)`` vs ``(1, 8)``, silently compares the wrong pairs;
* a group that cannot be compared (shapes that do not fit, several runtime events for one reference
  handle, a runtime event with fewer tensors than outputs) is reported by :func:`explain_unpaired`
  instead of raising and losing every other row;
* when the reference output ExecuTorch's rule picks has another shape than the runtime tensor, the
  one reference tensor of the group with exactly that shape is compared instead: the whole tensor an
  op wrote in place through a view (``index[0].fill_(v)``; the runtime's functionalized
  ``select_scatter``/``where`` logs the whole tensor; ExecuTorch broadcasts the row against it: BEiT's
  relative position index reads MSE 808 for two equal tensors), or another op's output (a delegate
  ending in a ``transpose``); ExecuTorch raises or broadcasts;
* an empty result still has the columns.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import EtlensError, MissingDataError
from ..comparators import METRIC_NAMES, NumericalComparatorBase, get_comparator
from ..gcpause import gc_paused
from ..protocols import InspectorLike, is_columnar
from ..record import Record, as_record
from .capture import Capture, capture_reference, resolve_reference
from ...builder import oplibs
from .inputs import inputs_for_run
from .jsonrun import JsonProgram
from .delegates import lazy_output_handles
from .tensorcheck import align_multi, describe, is_tensor, relative_mse, shapes_differ, sizes_differ
from .match import HandleNameIndex, PairInfo, PairResult, pair_outputs
from .reasons import Reason
from .runtime import RuntimeOutputs, collect_runtime_outputs, runtime_blocks

__all__ = ["calculate_numeric_gap", "explain_unpaired", "first_divergence", "analyze", "NumericalAnalysis",
           "Divergence", "GAP_COLUMNS", "METRIC_NAMES", "KEEP_CHOICES",
           "DELEGATE_OUTPUT_CHOICES"]

#: the columns of the gap table, in ExecuTorch's order
GAP_COLUMNS = ["aot_debug_handle", "aot_ops", "aot_intermediate_output", "runtime_ops", "runtime_debug_handle",
               "runtime_intermediate_output", "gap", "stacktraces"]
#: ``keep_outputs`` choices: every reference output, or only those a runtime event can pair with
KEEP_CHOICES = ("all", "compared")
#: ``delegate_outputs`` choices: each output of a delegate call paired with the node that returns it
#: (``"graph"``, from the edge program), or ExecuTorch's positional guess (``"executorch"``)
DELEGATE_OUTPUT_CHOICES = ("graph", "executorch")

#: the method whose runs are compared (the ETRecord's reference programs are ``forward``'s)
_METHOD = "forward"
_HINT_ETRECORD = ("export with to_edge_transform_and_lower(..., generate_etrecord=True), then "
                  "etrecord = program.get_etrecord(); etrecord.update_representative_inputs([example_inputs]); "
                  "etrecord.save('model.etrecord')")
_HINT_DEBUG = ("run the program with ETDump and a debug buffer: "
               "_load_for_executorch_from_buffer(pte, enable_etdump=True, debug_buffer_size=64 << 20), "
               "then module.write_etdump_result_to_file('run.etdp', 'run.debug.bin') "
               "(in C++: ETDumpGen::set_debug_buffer and EventTracerDebugLogLevel::kIntermediateOutputs)")


#: analyses already made, per etlens inspector (``id`` -> cache; an entry goes with its inspector):
#: running the reference is the costly part, a new metric reuses it
_ANALYSES: dict[int, dict] = {}


def _cache_of(inspector: Any) -> dict | None:
    """The analyses of an etlens ``inspector`` made so far; ``None`` (no caching) for ExecuTorch's."""
    if not is_columnar(inspector):
        return None
    key = id(inspector)
    cache = _ANALYSES.get(key)
    if cache is None:
        try:
            weakref.finalize(inspector, _ANALYSES.pop, key, None)
        except TypeError:  # not weakly referenceable: no cache rather than a leak
            return None
        cache = _ANALYSES[key] = {}
    return cache


# -- inputs from the inspector -------------------------------------------------------------------
def _record_of(inspector: InspectorLike) -> Record:
    if is_columnar(inspector):
        rec = inspector.record
    else:  # ExecuTorch's Inspector keeps the ETRecord it was given (a path or a parsed one)
        rec = inspector._etrecord
        if isinstance(rec, str):
            from ...readers.etrecord import read

            rec = read(rec)
    if rec is not None:
        return as_record(rec)
    raise MissingDataError(f"the numeric gap needs the ETRecord: pass etrecord='model.etrecord' to the Inspector; "
                           f"to produce one, {_HINT_ETRECORD}")




def _check_runtime(runtime: RuntimeOutputs, inspector: InspectorLike) -> None:
    if runtime.n_debug_events and is_columnar(inspector) and not inspector.has_debug_buffer:
        # etlens.Inspector without a buffer decodes logged tensors as zeros (as ExecuTorch does):
        # comparing those would report a huge, meaningless gap
        raise MissingDataError(
            "the ETDump refers to intermediate tensors stored in a debug buffer, but no debug buffer was given: "
            "pass debug_buffer_path='run.debug.bin' to the Inspector (--debug-buffer on the command line), "
            "the file written by module.write_etdump_result_to_file(etdp_path, debug_buffer_path)")
    if runtime.n_debug_events:
        return
    raise MissingDataError(
        "the ETDump holds no intermediate outputs tied to operators of the ETRecord, so there is nothing to "
        f"compare; {_HINT_DEBUG} (if it does hold them, pass the ETRecord this program was exported with)")


# -- the analysis ------------------------------------------------------------------------------------
@dataclass
class Divergence:
    """The earliest reference op (in graph order) whose gap crosses the threshold."""

    row: int  # index into the gap table
    op: str  # name of the node whose output was compared
    target: str  # its operator
    aot_ops: list
    runtime_ops: list
    debug_handle: tuple
    gap: list
    metric: str
    threshold: float
    module_path: str | None
    module_type: str | None
    stack_trace: str | None

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    def __str__(self) -> str:
        where = f" in {self.module_path} ({self.module_type})" if self.module_path else ""
        gap = ", ".join(f"{g:.6g}" for g in self.gap)
        return (f"first divergence: {self.op} ({self.target}){where}, {self.metric} = {gap} "
                f"(threshold {self.threshold:g}), debug handle {self.debug_handle}")


class NumericalAnalysis:
    """The reference capture, the runtime selection and their pairing, computed once.

    Build with :func:`analyze`. :meth:`gap_table` computes a metric over the pairs;
    :meth:`explain_unpaired` and :meth:`first_divergence` reuse the same pairing.
    """

    def __init__(self, capture: Capture, runtime: RuntimeOutputs, paired: PairResult,
                 inspector: InspectorLike | None = None):
        self.capture = capture
        self.runtime = runtime
        self.paired = paired
        self.inspector = inspector
        self._aot_names = HandleNameIndex(capture.op_names)
        self._rt_names = HandleNameIndex(runtime.op_names)
        self.last_errors: list[dict] = []  # pairs the last gap_table could not compare
        self.inputs: tuple | None = None  # what the reference ran on
        self.inputs_source: str | None = None  # where those inputs came from (ETRecord, --inputs, debug buffer)
        self.run = 0  # which run of the method was compared (0: the first, an LLM's prefill)

    @property
    def reference_graph(self) -> str:
        return self.capture.graph_name

    # -- gap table ---------------------------------------------------------------------------
    def _rows(self, comparator: Any, multi_output: bool) -> tuple[list[dict], list[PairInfo | None], list[dict]]:
        mapping = self.paired.mapping
        processed = comparator.preprocessing(mapping)
        validate = getattr(comparator, "_validate_preprocessing_output", None) or \
            NumericalComparatorBase._validate_preprocessing_output
        validate(processed)
        infos_by_key = dict(zip(mapping.keys(), self.paired.info))
        compare = getattr(comparator, "_compare_intermediate_outputs", None)
        rows: list[dict] = []
        infos: list[PairInfo | None] = []
        errors: list[dict] = []
        # first the pairs to compare (in order), so the comparator can compute them as one batch
        todo: list[tuple] = []
        for key, (rt_handle, rt_out) in processed.items():
            aot_handle, aot_out = key
            info = infos_by_key.get(key)
            if aot_out is None or rt_out is None:
                continue
            a, b = aot_out, rt_out
            if isinstance(aot_out, Sequence) and len(aot_out) > 1:
                if not multi_output:
                    errors.append({"debug_handle": aot_handle, "runtime_debug_handle": rt_handle,
                                   "reason": Reason.MULTI_OUTPUT, "info": info,
                                   "detail": f"returns {len(aot_out)} tensors; ExecuTorch's table skips such ops "
                                             f"(pass multi_output=True to compare them by position)"})
                    continue
                a, b = align_multi(aot_out, rt_out)
                if a is None:
                    errors.append({"debug_handle": aot_handle, "runtime_debug_handle": rt_handle,
                                   "reason": Reason.MULTI_OUTPUT, "info": info,
                                   "detail": f"reference returns {len(aot_out)} tensors, runtime logged "
                                             f"{len(rt_out) if isinstance(rt_out, Sequence) else 1}; no "
                                             f"positional match"})
                    continue
            else:
                better = self._same_shape_reference(aot_handle, info, a, b)
                if better is not None:
                    a = aot_out = better
                if sizes_differ(a, b):
                    # broadcasting one against the other gives a number that means nothing ((5, 3, 20)
                    # against (3, 20) read MSE 0.03 on an exact LSTM): no row, a reason instead
                    errors.append({"debug_handle": aot_handle, "runtime_debug_handle": rt_handle,
                                   "reason": Reason.SHAPE_MISMATCH, "info": info,
                                   "detail": f"reference {describe(a)} vs runtime {describe(b)}: different "
                                             f"sizes, so these are not the same tensor"})
                    continue
            todo.append((aot_handle, aot_out, rt_handle, rt_out, info, a, b))
        batch = getattr(comparator, "compare_batch", None)
        single = [(a, b) if not isinstance(a, Sequence) and not isinstance(b, Sequence) else (None, None)
                  for *_, a, b in todo]
        batched = batch(single) if compare is not None and callable(batch) else {}
        for i, (aot_handle, aot_out, rt_handle, rt_out, info, a, b) in enumerate(todo):
            try:
                gap = batched.get(i)
                if gap is None:
                    gap = compare(a, b) if compare is not None else [comparator.element_compare(a, b)]
            except (ValueError, RuntimeError, TypeError) as exc:
                errors.append({"debug_handle": aot_handle, "runtime_debug_handle": rt_handle,
                               "reason": Reason.SHAPE_MISMATCH if shapes_differ(a, b) else Reason.NOT_COMPARABLE,
                               "info": info, "detail": f"{describe(a)} vs {describe(b)}: {exc}"})
                continue
            rows.append({
                "aot_debug_handle": aot_handle,
                "aot_ops": self._aot_names.find(aot_handle),
                "aot_intermediate_output": aot_out,
                "runtime_ops": self._rt_names.find(rt_handle),
                "runtime_debug_handle": rt_handle,
                "runtime_intermediate_output": rt_out,
                "gap": gap,
            })
            infos.append(info)
        return rows, infos, errors

    def _same_shape_reference(self, aot_handle: tuple, info: PairInfo | None, a: Any, b: Any) -> Any:
        """A reference tensor of exactly the runtime tensor's shape when the chosen one has another shape.

        Looked for, in this order, in the group and kept only when there is exactly one:

        * the whole tensor the chosen op wrote in place through a view (:attr:`Capture.bases`):
          ``index[0].fill_(v)`` returns the row, but the runtime runs the functionalized program
          (``select_scatter``/``where``), which returns and logs the whole updated ``index``;
        * the output of another reference op of the group (a delegate that ends in a ``transpose`` logs
          its result; ExecuTorch's rule picks the ``view`` before it, ``(1, 16, 4, 48)`` against
          ``(1, 4, 16, 48)``).

        Comparing the chosen tensor would broadcast one shape against the other, or read a transposed
        tensor in memory order, and report a gap that is not there. ``None``: keep the chosen one.
        """
        shape_b = getattr(b, "shape", None)
        shape_a = getattr(a, "shape", None)
        if shape_a is None or shape_b is None or tuple(shape_a) == tuple(shape_b):
            return None
        chosen = info.aot_handle if info is not None else aot_handle
        base = self.capture.bases.get(chosen)
        if base is not None and tuple(base.shape) == tuple(shape_b):
            return base
        handles = info.aot_handles if info is not None else []
        found = [out for h in handles if h != chosen
                 for out in [self.capture.outputs.get(h)] if getattr(out, "shape", None) is not None
                 and tuple(out.shape) == tuple(shape_b) and out.dtype == b.dtype]
        return found[0] if len(found) == 1 else None

    def gap_table(self, distance: Any = "MSE", multi_output: bool = False):
        """The gap DataFrame for ``distance`` (a metric name or a comparator instance).

        ``multi_output=True`` also compares reference ops that return several tensors (ExecuTorch
        skips them): each runtime tensor against the reference output at the same position counted
        from the end, one gap per tensor.
        """
        import pandas as pd

        comparator = get_comparator(distance, self.inspector)
        if _overrides_compare(comparator):
            df = comparator.compare(self.paired.mapping, self.capture.op_names, self.runtime.op_names)
            self.last_errors = []
        else:
            rows, _, errors = self._rows(comparator, multi_output)
            self.last_errors = errors
            df = pd.DataFrame(rows, columns=GAP_COLUMNS[:-1])
        traces = {name: node.stack_trace for name, node in self.capture.nodes.items() if node.handle is not None}
        if len(df) > 0:
            df["stacktraces"] = [{name: traces.get(name) for name in ops} for ops in df["aot_ops"]]
        else:
            df = pd.DataFrame(columns=GAP_COLUMNS)
        return df

    # -- first divergence -----------------------------------------------------------------------
    def first_divergence(self, threshold: float, metric: Any = "MSE", multi_output: bool = False,
                         skip_rows: Any = ()) -> Divergence | None:
        """The earliest compared op, in reference-graph order, whose gap crosses ``threshold``.

        "Crosses" means above the threshold for distances (MSE, L1, max_abs) and below it for
        similarities (SNR in dB, cosine). A NaN gap always crosses. Returns ``None`` when no op does.
        ``skip_rows``: row indices of the gap table not to consider (e.g. :meth:`mispaired`'s).
        """
        comparator = get_comparator(metric, self.inspector)
        rows, infos, _ = self._rows(comparator, multi_output)
        crosses = getattr(comparator, "crosses", None) or (lambda g, t: _crosses(comparator, g, t))
        best: tuple | None = None
        for i, (row, info) in enumerate(zip(rows, infos)):
            if i in skip_rows or not any(crosses(float(g), threshold) for g in row["gap"]):
                continue
            node = self._compared_node(info, row)
            order = node.order if node is not None else 1 << 60
            if best is None or order < best[0]:
                best = (order, i, row, node)
        if best is None:
            return None
        _, i, row, node = best
        return Divergence(
            row=i, op=node.name if node else (row["aot_ops"][-1] if row["aot_ops"] else "?"),
            target=node.target if node else "?", aot_ops=row["aot_ops"], runtime_ops=row["runtime_ops"],
            debug_handle=row["aot_debug_handle"], gap=[float(g) for g in row["gap"]],
            metric=getattr(comparator, "name", type(comparator).__name__), threshold=threshold,
            module_path=node.module_path if node else None, module_type=node.module_type if node else None,
            stack_trace=node.stack_trace if node else None)

    def mispaired(self, multi_output: bool = False) -> dict[int, dict]:
        """Rows whose runtime tensor is, to float rounding, another reference op's output of the same group.

        ExecuTorch's rule pairs a delegate's logged tensors with the group's reference ops by position
        in the merged handle tuple, which is not always the order the delegate wrote them: ConvNeXt's
        ``permute -> conv2d -> permute`` delegate logs the first permute's output, and the rule compares it
        with the conv's (fp32 MSE 1.01 for a tensor that is exact). A row is listed when its relative MSE
        (MSE over the runtime tensor's mean square) is above 1e-6 while another op of its group has the
        runtime tensor's size and dtype and a relative MSE below 1e-10. The table keeps ExecuTorch's row;
        this says which rows to distrust. ``{row index: {"op", "equals", "relative_mse", "equals_relative_mse"}}``.
        """
        comparator = get_comparator("MSE", self.inspector)
        rows, infos, _ = self._rows(comparator, multi_output)
        out: dict[int, dict] = {}
        for i, (row, info) in enumerate(zip(rows, infos)):
            a, b = row["aot_intermediate_output"], row["runtime_intermediate_output"]
            if info is None or len(info.aot_handles) < 2 or not (is_tensor(a) and is_tensor(b)):
                continue
            chosen = relative_mse(a, b)
            if chosen is None or not chosen > 1e-6:
                continue
            for h in info.aot_handles:
                other = self.capture.outputs.get(h)
                if h == info.aot_handle or not is_tensor(other) or other.dtype != b.dtype:
                    continue
                err = relative_mse(other, b)
                if err is not None and err < 1e-10:
                    node = self._compared_node(info, row)
                    out[i] = {"op": node.name if node else row["aot_ops"][-1],
                              "equals": self.capture.last_node.get(h, "?"), "relative_mse": chosen,
                              "equals_relative_mse": err}
                    break
        return out

    def _compared_node(self, info: PairInfo | None, row: dict):
        if info is not None:
            name = self.capture.last_node.get(info.aot_handle)
            if name is not None:
                return self.capture.nodes.get(name)
        nodes = [self.capture.nodes[n] for n in row["aot_ops"] if n in self.capture.nodes]
        return max(nodes, key=lambda n: n.order) if nodes else None

    # -- explanations -------------------------------------------------------------------------------
    def explain_unpaired(self, include_framework_events: bool = False, multi_output: bool = False):
        """Every reference op and runtime event without its own row in the gap table, and why."""
        from .explain import explain

        return explain(self, include_framework_events=include_framework_events, multi_output=multi_output)


def _crosses(comparator: Any, gap: float, threshold: float) -> bool:
    """Threshold test for comparators without ``crosses`` (e.g. written against ExecuTorch's base)."""
    if gap != gap:
        return True
    return gap < threshold if getattr(comparator, "higher_is_better", False) else gap > threshold


def _overrides_compare(comparator: Any) -> bool:
    """True when the comparator replaces the whole ``compare`` pipeline (then it is called as is)."""
    for cls in type(comparator).__mro__:
        if "compare" in cls.__dict__:
            return cls.__name__ != "NumericalComparatorBase"
    return False


# -- entry points -------------------------------------------------------------------------------------

def _stage_of(exc: BaseException) -> str:
    """Which step of :func:`_analyze` raised, from the innermost frame of etlens' numerics in the traceback."""
    stages = {"resolve_reference": "picking the reference program", "_resolve": "picking the reference program",
              "propagate_back_handles": "mapping debug handles back to the ATen program",
              "capture_reference": "running the reference program", "_capture_fx": "running the reference program",
              "_capture_json": "running the reference program", "collect_runtime_outputs": "reading runtime outputs",
              "pair_outputs": "pairing reference and runtime outputs"}
    tb, found = exc.__traceback__, "analyzing the program"
    while tb is not None:
        found = stages.get(tb.tb_frame.f_code.co_name, found)
        tb = tb.tb_next
    return found


def _resolve_validation(disable_debug_handle_valdiation: bool, disable_debug_handle_validation: bool | None) -> bool:
    return bool(disable_debug_handle_valdiation or disable_debug_handle_validation)


def analyze(inspector: InspectorLike, reference_graph: str | None = None, disable_debug_handle_validation: bool = False,
            keep_outputs: str = "all", delegate_outputs: str = "graph", *, inputs: Any = None,
            run: int = 0) -> NumericalAnalysis:
    """Capture the reference, select the runtime outputs and pair them (cached on the inspector).

    Args:
        inspector: an ``etlens.Inspector`` (or anything with ``event_blocks`` and an ETRecord).
        reference_graph: ``None`` (ATen program if its handles propagate, else the edge program),
            ``"exported_program"``, ``"edge_dialect_exported_program"`` or a graph-map name.
        disable_debug_handle_validation: use the ATen program even when some edge handles have no
            ATen node (best effort).
        keep_outputs: ``"all"`` keeps every reference output (as ExecuTorch); ``"compared"`` keeps
            only outputs whose handle occurs in a runtime event, which is what can be compared.
        delegate_outputs: ``"graph"`` pairs each output of a delegate call that returns several
            tensors with the node that returns it (the partition's boundary in the edge program,
            :mod:`.delegates`); ``"executorch"`` keeps ExecuTorch's positional rule, which compares
            the wrong tensors when the delegate's last nodes are not its outputs (recurrent cells,
            ConvNeXt's ``permute -> conv -> permute``). Both give the same rows where the rule is right.
        inputs: what the reference runs on instead of the ETRecord's representative inputs: a
            tuple of tensors or the path of a ``torch.save``-d one. Without either, the inputs are
            recovered from the debug buffer where the program's first ops determine them
            (:mod:`.inputs`; ExecuTorch's ``export_llama`` records none). The analysis keeps what
            it ran on in ``.inputs`` and where it came from in ``.inputs_source``.
        run: which run of ``forward`` in the dump is compared: 0 (default) is the first — an LLM's
            prefill, and the run ExecuTorch compares. ``N > 0`` (a decode step) replays the
            reference over runs ``0..N`` with each run's inputs (recovered, or ``inputs`` as a list
            of tuples, one per run), carrying its buffer writes (the KV cache) from run to run.
    """
    if keep_outputs not in KEEP_CHOICES:
        raise EtlensError(f"keep_outputs must be one of {KEEP_CHOICES}, got {keep_outputs!r}")
    if delegate_outputs not in DELEGATE_OUTPUT_CHOICES:
        raise EtlensError(f"delegate_outputs must be one of {DELEGATE_OUTPUT_CHOICES}, got {delegate_outputs!r}")
    cache_key = (reference_graph, bool(disable_debug_handle_validation), keep_outputs, delegate_outputs,
                 inputs if isinstance(inputs, (str, type(None))) else id(inputs), int(run))
    cache = _cache_of(inspector)
    if cache is not None and cache_key in cache:
        return cache[cache_key]

    with gc_paused():
        try:
            analysis = _analyze(inspector, reference_graph, disable_debug_handle_validation, keep_outputs,
                                delegate_outputs, inputs, int(run))
        except EtlensError:
            raise
        except Exception as exc:  # a real model must give rows or a reason, never a raw traceback
            raise EtlensError(
                f"the numeric comparison failed while {_stage_of(exc)}: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300] if str(exc) else ''}; this is a limitation of etlens on this "
                f"program (please report it with the ETRecord)") from exc
    if cache is not None:
        cache[cache_key] = analysis
    return analysis


def _analyze(inspector: InspectorLike, reference_graph: str | None, disable_debug_handle_validation: bool,
             keep_outputs: str, delegate_outputs: str = "graph", given_inputs: Any = None,
             run: int = 0) -> NumericalAnalysis:
    record = as_record(_record_of(inspector))
    runtime = collect_runtime_outputs(runtime_blocks(inspector, run=run, method=_METHOD))
    _check_runtime(runtime, inspector)
    ref = resolve_reference(record, reference_graph, bool(disable_debug_handle_validation))
    from_json = isinstance(ref.program, JsonProgram)  # run eagerly: native kernels suffice
    if oplibs.load_for(ref.program, eager=from_json) and not from_json:
        # deserialized before its custom ops (llama::update_cache …) were registered: read it again
        ref = resolve_reference(record, reference_graph, bool(disable_debug_handle_validation))

    def runtime_of(k: int) -> RuntimeOutputs:
        return runtime if k == run else collect_runtime_outputs(runtime_blocks(inspector, run=k, method=_METHOD))

    inputs, source, warmup = inputs_for_run(record, given_inputs, run, ref, runtime_of)
    keep = None
    if keep_outputs == "compared":
        wanted = {h for key in runtime.outputs for h in key}

        def keep(key: tuple) -> bool:
            return bool(key) and key[0] in wanted

    capture = capture_reference(ref, inputs, keep, warmup)
    if not capture.op_names:
        raise MissingDataError(f"the reference program {ref.name!r} has no nodes with debug handles; "
                               f"regenerate the ETRecord with generate_etrecord=True")
    paired = pair_outputs(capture.outputs, runtime.outputs,
                          lazy_output_handles(record) if delegate_outputs == "graph" else None)
    analysis = NumericalAnalysis(capture, runtime, paired, inspector)
    analysis.inputs, analysis.inputs_source, analysis.run = inputs, source, run
    return analysis


def calculate_numeric_gap(inspector: InspectorLike, distance: Any = "MSE",
                          disable_debug_handle_valdiation: bool = False, reference_graph: str | None = None, *,
                          disable_debug_handle_validation: bool | None = None, keep_outputs: str = "all",
                          multi_output: bool = False, delegate_outputs: str = "graph", inputs: Any = None,
                          run: int = 0):
    """Per-op numeric gap between the ETRecord reference and the runtime (ExecuTorch-compatible).

    Args:
        inspector: the Inspector holding the ETDump (with intermediate outputs) and the ETRecord.
        distance: ``"MSE"``, ``"L1"``, ``"SNR"``, ``"cosine"``, ``"max_abs"`` or a
            :class:`~etlens.analysis.comparators.NumericalComparatorBase` instance.
        disable_debug_handle_valdiation: ExecuTorch's (misspelled) keyword, accepted as is.
        reference_graph: which program is the reference (see :func:`analyze`).
        disable_debug_handle_validation: the same switch, spelled correctly.
        keep_outputs: ``"compared"`` bounds memory to the outputs that can be compared.
        multi_output: also compare ops with several outputs (ExecuTorch skips them).
        inputs: the method's inputs (a tuple, or a ``torch.save`` file) when the ETRecord has no
            representative inputs (see :func:`analyze`).
        run: which run of ``forward`` to compare (0: the first, an LLM's prefill; see :func:`analyze`).
        delegate_outputs: ``"graph"`` (default) or ``"executorch"``: how the outputs of a delegate
            call with several outputs find their reference op (see :func:`analyze`).

    Returns:
        a DataFrame with columns :data:`GAP_COLUMNS`, one row per compared op group; ``gap`` is a list
        (one value per compared tensor), ``stacktraces`` maps each op name to its stack trace.
    """
    analysis = analyze(inspector, reference_graph,
                       _resolve_validation(disable_debug_handle_valdiation, disable_debug_handle_validation),
                       keep_outputs, delegate_outputs, inputs=inputs, run=run)
    with gc_paused():
        return analysis.gap_table(distance, multi_output=multi_output)


def explain_unpaired(inspector: InspectorLike, reference_graph: str | None = None,
                     disable_debug_handle_validation: bool = False, *, include_framework_events: bool = False,
                     multi_output: bool = False, disable_debug_handle_valdiation: bool = False):
    """Every reference op and runtime event that has no row of its own in the gap table, and why.

    Returns a DataFrame with columns ``side`` (``reference``/``runtime``), ``name``, ``op``,
    ``debug_handle``, ``reason`` (a code, see :class:`etlens.analysis.numerics.reasons.Reason`),
    ``detail`` (a sentence), ``module_path``, ``stack_trace``, ``row`` (the gap-table row that covers it,
    if any). Reference ops come first in graph order, then runtime events in dump order.
    """
    analysis = analyze(inspector, reference_graph,
                       _resolve_validation(disable_debug_handle_valdiation, disable_debug_handle_validation))
    return analysis.explain_unpaired(include_framework_events=include_framework_events, multi_output=multi_output)


def first_divergence(inspector: InspectorLike, threshold: float, metric: Any = "MSE",
                     reference_graph: str | None = None, disable_debug_handle_validation: bool = False, *,
                     multi_output: bool = False) -> Divergence | None:
    """The earliest op in graph order whose gap crosses ``threshold`` (module path, stack trace), or None."""
    analysis = analyze(inspector, reference_graph, disable_debug_handle_validation)
    return analysis.first_divergence(threshold, metric, multi_output=multi_output)

