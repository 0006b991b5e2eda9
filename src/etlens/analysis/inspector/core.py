"""``etlens.Inspector``: a drop-in for ``executorch.devtools.Inspector``, built on columns.

Switch by changing the import; constructor arguments, ``event_blocks``, ``Event`` /
``EventBlock`` / ``PerfData`` fields, ``to_dataframe`` columns, ``print_data_tabular``,
``save_data_to_tsv``, ``find_total_for_module`` and ``get_exported_program`` behave the same.
The ETDump is decoded natively (no ``flatc``, no JSON), events stay in numpy columns
(:class:`~etlens.model.events.BlockColumns`) and ``Event`` objects are only built when
``event_blocks`` is read; debug tensors are decoded from the memory-mapped debug buffer on first
access. Beyond ExecuTorch: :meth:`Inspector.get_op_list`, ``method=`` for multi-method programs,
bf16/float8 tensors. The methods that render views (``print_data_tabular``,
``write_tensorboard_artifact``, ``write_perfetto_trace``, ``summary_text``) are added by the facade
class :class:`etlens.compat.Inspector`, which is what ``etlens.Inspector`` is.

Example::

    import etlens
    insp = etlens.Inspector(etdump_path="run.etdp", etrecord="model.etrecord",
                            debug_buffer_path="run.debug.bin")
    df = insp.to_dataframe()                 # same columns as ExecuTorch
    insp.print_data_tabular()
    insp.get_op_list("Execute")              # {"aten.linear.default": [Event, ...], ...}

For numerics (``calculate_numeric_gap``), :meth:`Inspector.runtime_intermediate_outputs` gives,
per event block, every operator event with its instruction id, debug handles, number of outputs,
op types and *lazily decoded* intermediate outputs — the runtime side of the comparison.
"""

from __future__ import annotations

import logging
import warnings
from typing import IO, Any, Callable, Dict, List, Optional

import numpy as np

from ...errors import EtlensError, MissingDataError
from ...model.events import BlockColumns, PerfData, TimeScale, calculate_time_scale_factor
from ...readers.etdump import SCALAR_TYPES, V_TENSOR, V_TENSOR_LIST, DebugBuffer, ETDump, read_etdump
from ..record import Record, as_record
from .events import Event, EventBlock, RuntimeOutput
from .linking import EDGE_DIALECT_GRAPH_KEY, RecordLinking, load_record
from .frame import EXCLUDED_COLUMNS_WHEN_PRINTING, EXCLUDED_EVENTS_WHEN_PRINTING, LazyList, build_frame
from ..gcpause import gc_paused
from ...schema import FRAMEWORK_EVENT_NAMES, OPERATOR_CALL

__all__ = ["Inspector", "Event", "EventBlock", "PerfData", "TimeScale", "RuntimeOutput"]

log = logging.getLogger(__name__)


def _itemsize_table() -> np.ndarray:
    """Element size by scalar-type code, indexed by ``code & 0xFF`` (callers count codes outside 0-255
    as 1, like codes with no storage type): one gather per run instead of a dict lookup per tensor."""
    table = np.ones(256, dtype=np.int64)
    for code, info in SCALAR_TYPES.items():
        table[code & 0xFF] = info.itemsize
    return table


_ITEMSIZE = _itemsize_table()


class Inspector(RecordLinking):
    """Examine per-operator timings and intermediate outputs of an ExecuTorch run.

    Args (as in ExecuTorch): ``etdump_path`` or ``etdump_data`` (exactly one); ``etrecord`` (a
    path, an etlens ``ETRecord`` or an ExecuTorch ``ETRecord``); ``source_time_scale`` /
    ``target_time_scale`` (:class:`TimeScale`, default ns → ms; cycles only to cycles);
    ``debug_buffer_path``; ``delegate_metadata_parser``; ``delegate_time_scale_converter``
    (``f(event_name, time) -> time`` for delegated events; default divides by the scale factor);
    ``enable_module_hierarchy`` (accepted; module keys are always available);
    ``reference_graph_name`` (``edge_dialect_graph_module`` = the edge program, or a graph-map
    name). etlens extras: ``method`` (which method's maps to use; default ``forward``, or the only
    method of the record), ``progress`` (show a progress bar), ``pte`` (the program, so that
    :meth:`attribution` / :meth:`node_dataframe` can attribute time inside delegates to ATen nodes,
    and metadata methods get their names). Multi-method programs: :attr:`block_methods`,
    ``to_dataframe(method=...)``; :meth:`run_debug_data` reads any run's logged values.

    Bad input: a wrong or truncated ``.etdp`` raises :class:`~etlens.errors.FormatError`; a
    missing debug buffer or one too short for some tensors, or an ETRecord whose handles do not
    resolve, only warns (``warnings``) and says what still works.

    For numerics: :meth:`runtime_intermediate_outputs` lists, per block, each operator event's
    debug handles and lazily decoded intermediate outputs; ``calculate_numeric_gap`` and
    ``explain_unpaired`` delegate to :mod:`etlens.analysis.numerics`.
    """

    def __init__(
        self,
        etdump_path: Optional[str] = None,
        etdump_data: Optional[bytes] = None,
        etrecord: Any = None,
        source_time_scale: TimeScale = TimeScale.NS,
        target_time_scale: TimeScale = TimeScale.MS,
        debug_buffer_path: Optional[str] = None,
        delegate_metadata_parser: Optional[Callable] = None,
        delegate_time_scale_converter: Optional[Callable] = None,
        enable_module_hierarchy: bool = False,
        reference_graph_name: str = EDGE_DIALECT_GRAPH_KEY,
        *,
        method: Optional[str] = None,
        debug_buffer_data: Optional[bytes] = None,
        pte: Any = None,
    ) -> None:
        source_time_scale, target_time_scale = TimeScale(source_time_scale), TimeScale(target_time_scale)
        if (source_time_scale == TimeScale.CYCLES) ^ (target_time_scale == TimeScale.CYCLES):
            raise EtlensError("time scales: when one of source_time_scale/target_time_scale is CYCLES the other "
                              "must be CYCLES too (cycles cannot be converted to seconds)")
        if (etdump_path is None) == (etdump_data is None):
            raise EtlensError("Inspector: pass exactly one of etdump_path or etdump_data")
        self._source_time_scale = source_time_scale
        self._target_time_scale = target_time_scale
        self._delegate_metadata_parser = delegate_metadata_parser
        self._delegate_time_scale_converter = delegate_time_scale_converter
        self._enable_module_hierarchy = enable_module_hierarchy
        self._reference_graph_name = reference_graph_name
        with gc_paused():  # the load builds many small long-lived objects, no cycles: see gcpause.py
            self._etrecord = load_record(etrecord)  # as given (ExecuTorch's attribute name)
            #: the ETRecord behind one interface, whichever kind was given (``None`` without one)
            self.record: Optional[Record] = as_record(self._etrecord) if self._etrecord is not None else None
            # etdump_data may also be an ETDump already parsed (a report's readers.artifacts.ArtifactSet)
            self._dump: ETDump = (etdump_data if isinstance(etdump_data, ETDump) else
                                  read_etdump(etdump_path if etdump_path is not None else etdump_data))
            self._buffer: Optional[DebugBuffer] = None
            self._debug_data: Any = None  # DebugData of the dump and buffer (made on first use)
            if debug_buffer_path is not None or debug_buffer_data is not None:
                self._buffer = DebugBuffer(debug_buffer_path, data=debug_buffer_data)
                self._check_buffer()
            elif self._has_tensors():
                warnings.warn("Output Buffer not found. Tensor Debug Data will not be available "
                              "(debug_data tensors are zeros of the logged shape; timings are complete).", stacklevel=2)
            scale = calculate_time_scale_factor(source_time_scale, target_time_scale)
            from .build import build_blocks

            self._blocks: list[BlockColumns] = build_blocks(self._dump, scale, delegate_time_scale_converter)
            self._event_blocks: Optional[list[EventBlock]] = None
            self.op_graph_dict = None
            self._reference_outputs: dict = {}
            self._method = method
            self._block_methods: list[str] = []
            #: the program (path or read ``PteArtifact``) used to look inside delegates (etlens extra)
            self.pte = pte
            self._attribution: Any = None
            self._consume_etrecord()
            if not self._block_methods:
                self._block_methods = [self._method_name()] * len(self._blocks)
                self._label_blocks()

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_files(cls, etdump: str, etrecord: Any = None, debug_buffer: Optional[str] = None, **kw) -> "Inspector":
        """Load an inspector from file paths (the etlens-style spelling of the constructor)."""
        return cls(etdump_path=etdump, etrecord=etrecord, debug_buffer_path=debug_buffer, **kw)

    def _has_tensors(self) -> bool:
        return any(bool(np.isin(r.value_type, (V_TENSOR, V_TENSOR_LIST)).any()) for r in self._dump.runs)

    def _check_buffer(self) -> None:
        """Warn once about tensors that lie past the end of the debug buffer."""
        size, bad, first = self._buffer.size, 0, None
        for r in self._dump.runs:
            idx = np.flatnonzero(r.tensor_pos != 0)
            if not idx.size:
                continue
            nd = r.ndim[idx].astype(np.int64)
            width = int(nd.max()) if nd.size else 0
            count = np.ones(idx.size, dtype=np.int64)
            if width:
                cols = np.arange(width, dtype=np.int64)
                mask = cols[None, :] < nd[:, None]
                pos = np.where(mask, r.sizes_pos[idx][:, None] + 8 * cols, 0)
                vals = np.where(mask, self._dump.read_i64(pos.ravel(), "Tensor.sizes").reshape(pos.shape), 1)
                count = np.prod(np.maximum(vals, 0), axis=1)
            codes = r.scalar_type[idx].astype(np.int64)
            item = np.where((codes >= 0) & (codes < 256), _ITEMSIZE[codes & 0xFF], 1)
            end = r.tensor_offset[idx] + count * item
            over = (end > size) & (count > 0)
            if over.any():
                bad += int(over.sum())
                if first is None:
                    first = (int(r.tensor_offset[idx][over][0]), int(end[over][0]))
        if bad:
            warnings.warn(
                f"{self._buffer.path}: {bad} logged tensor(s) lie past the end of the {size}-byte debug buffer "
                f"(first: bytes {first[0]}..{first[1]}); it is truncated or from another run. Their debug_data "
                "entries are None; timings, op types and the other tensors still work.", stacklevel=3)

    @property
    def source_time_scale(self) -> TimeScale:
        """The unit of the runtime's timestamps in the ETDump (as given to the constructor)."""
        return self._source_time_scale

    # -- event blocks ------------------------------------------------------------------------------
    @property
    def event_blocks(self) -> List[EventBlock]:
        """``EventBlock`` objects with ``Event`` objects (built from the columns on first access)."""
        if self._event_blocks is None:
            self._event_blocks = [self._make_block(b) for b in self._blocks]
        return self._event_blocks

    @event_blocks.setter
    def event_blocks(self, value: List[EventBlock]) -> None:
        self._event_blocks = value

    def _debug_list(self, run: int, idxs: Optional[np.ndarray]) -> list:
        if idxs is None or len(idxs) == 0:
            return []
        if self._debug_data is None or self._debug_data.buffer is not self._buffer:
            from .debugdata import DebugData

            self._debug_data = DebugData(self._dump, self._buffer)
        return LazyList(len(idxs), self._debug_data, run, idxs)

    def _metadatas(self, b: BlockColumns, i: int) -> list:
        out = []
        for j, r in enumerate(b.runs):
            pe = int(b.prof_events[i, j])
            if pe < 0:
                continue
            m = self._dump.metadata(r, pe)
            out.append(m if m else "")
        return out if any(out) else []

    def _reference_output(self, b: BlockColumns):
        rec = self.record
        if rec is None or not rec.may_have_reference_outputs():
            return None
        try:
            ref = rec.reference_outputs()
        except EtlensError as exc:
            warnings.warn(f"reference outputs unavailable: {exc}", stacklevel=3)
            return None
        if ref is None:
            return None
        self._reference_outputs = ref
        try:
            return ref[self._method_name()][b.bundled_input_index]
        except (KeyError, IndexError, TypeError):
            return None

    def _make_block(self, b: BlockColumns) -> EventBlock:
        stats = b.stats()
        events = []
        r0 = b.runs[0]
        for i in range(len(b)):
            perf = None
            start = None
            if b.has_perf[i]:
                perf = PerfData(b.raw[i].tolist(), _stats=tuple(stats[i, :4]))
                start = b.start[i].tolist()
            events.append(Event(
                name=b.names[i], perf_data=perf, op_types=b.op_types[i], delegate_debug_identifier=b.delegate_ids[i],
                debug_handles=b.debug_handles[i], num_outputs=b.num_outputs[i], stack_traces=b.stack_traces[i],
                module_hierarchy=b.module_hierarchy[i], is_delegated_op=b.is_delegated[i],
                delegate_backend_name=b.backend_names[i], _delegate_debug_metadatas=self._metadatas(b, i),
                debug_data=self._debug_list(r0, b.debug_events[i]), _instruction_id=int(b.instruction_ids[i]),
                _delegate_metadata_parser=self._delegate_metadata_parser,
                _delegate_time_scale_converter=self._delegate_time_scale_converter, _start_time=start))
        return EventBlock(name=b.name, events=events, source_time_scale=self._source_time_scale,
                          target_time_scale=self._target_time_scale, bundled_input_index=b.bundled_input_index,
                          run_output=self._debug_list(r0, b.output_events),
                          reference_output=self._reference_output(b),
                          method=self._block_methods[self._blocks.index(b)] if self._block_methods else None)

    # -- tables --------------------------------------------------------------------------------------
    def _block_columns(self, b: BlockColumns) -> dict[str, list]:
        n = len(b)
        stats = b.stats().tolist()
        raw = b.raw.tolist()
        starts = b.start.tolist()
        r0 = b.runs[0]
        has = b.has_perf.tolist()
        return {
            "block": [b.name] * n,
            "name": b.names,
            "raw": [raw[i] if has[i] else None for i in range(n)],
            "stats": [stats[i] if has[i] else None for i in range(n)],
            "op_types": b.op_types,
            "delegate_id": b.delegate_ids,
            "stack_traces": b.stack_traces,
            "module_hierarchy": b.module_hierarchy,
            "is_delegated": b.is_delegated,
            "backend": b.backend_names,
            "debug_data": [self._debug_list(r0, d) for d in b.debug_events],
            "start_time": [starts[i] if has[i] else None for i in range(n)],
        }

    def _method_blocks(self, method: Optional[str]) -> list[int]:
        from .methods import blocks_of

        return blocks_of(self._block_methods, method, len(self._blocks))

    def to_dataframe(self, include_units: bool = True, include_delegate_debug_data: bool = False, *,
                     method: Optional[str] = None):
        """All events of all blocks, one row each, with ExecuTorch's columns and order.

        Columns: ``event_block_name, event_name, raw, p10 (ms), p50 (ms), p90 (ms), avg (ms),
        min (ms), max (ms), op_types, delegate_debug_identifier, stack_traces, module_hierarchy,
        is_delegated_op, delegate_backend_name, debug_data, start_time``. ``method`` (etlens extra)
        keeps only the blocks of that method (see :attr:`block_methods`).
        """
        import pandas as pd

        keep = self._method_blocks(method)
        if self._event_blocks is not None or include_delegate_debug_data:
            blocks = self.event_blocks
            frames = [blocks[i].to_dataframe(include_units, include_delegate_debug_data) for i in keep]
            return pd.concat(frames, ignore_index=True)
        units = f" ({self._target_time_scale.value})" if include_units else ""
        cols: dict[str, list] = {}
        with gc_paused():  # a list, a dict or two per row, all kept by the frame: see gcpause.py
            for b in (self._blocks[i] for i in keep):
                for k, v in self._block_columns(b).items():
                    cols.setdefault(k, []).extend(v)
            if not cols:
                raise MissingDataError(f"{self._dump.path}: the ETDump has no profiling or debug events "
                                       "(was the program run with ETDump enabled?)")
            return build_frame(cols, units)

    def printed_dataframe(self, include_units: bool = True, include_delegate_debug_data: bool = False, *,
                          method: Optional[str] = None):
        """The table ``print_data_tabular`` prints and ``save_data_to_tsv`` writes: ``OPERATOR_CALL``
        rows and bulky columns (raw timings, debug data …) left out."""
        df = self.to_dataframe(include_units, include_delegate_debug_data, method=method)
        df = df.drop(columns=EXCLUDED_COLUMNS_WHEN_PRINTING)
        for name in EXCLUDED_EVENTS_WHEN_PRINTING:
            df = df[~df["event_name"].str.contains(name)]
        return df.reset_index(drop=True)

    def save_data_to_tsv(self, file: IO[str], include_units: bool = True,
                         include_delegate_debug_data: bool = False) -> None:
        """Write the printed table as TSV (for spreadsheets)."""
        self.printed_dataframe(include_units, include_delegate_debug_data).to_csv(file, sep="\t")

    def find_total_for_module(self, module_name: str, *, include_delegate_internals: bool = False) -> float:
        """Sum of average times of the events (not ``OPERATOR_CALL``) inside module ``module_name``.

        By default ExecuTorch's rule: events whose module hierarchy names the module, so time
        inside a delegate counts only when the whole ``DELEGATE_CALL`` carries the module.
        ``include_delegate_internals=True`` (etlens) counts per ATen node instead, time inside
        delegates attributed to the node that ran it (needs ``pte=`` for delegates; see
        :meth:`attribution`).
        """
        if include_delegate_internals:
            from .nodes import module_total

            return module_total(self.attribution(), module_name)
        total = 0.0
        for b in self._blocks:
            stats = b.stats()
            for i, name in enumerate(b.names):
                if name == OPERATOR_CALL:
                    continue
                for hierarchy in b.module_hierarchy[i].values():
                    if not hierarchy:
                        continue
                    if any(module_name in key for key in hierarchy.keys()):
                        if b.has_perf[i]:
                            total += stats[i, 3]
                        break
        return total

    # -- beyond ExecuTorch ---------------------------------------------------------------------------
    def attribution(self, pte: Any = None):
        """Every timed event attributed to ATen nodes, delegate-internal events included, plus the
        framework tax (:class:`etlens.analysis.attribution.Attribution`). ``pte`` (path or read
        program; default the constructor's ``pte=``) lets the backend plug-in look inside delegates;
        without it their internal time is an ``<unattributed>`` remainder."""
        from ..attribution import attribute

        if pte is not None and pte is not self.pte:
            self.pte, self._attribution = pte, None
        if self._attribution is None:
            self._attribution = attribute(self, self.pte)
        return self._attribution

    def node_dataframe(self, include_units: bool = True, pte: Any = None):
        """One row per ATen node: ``node, debug_handles, op, module_path, source_line,
        inside_delegate, backend, backend_ops, match, p10/p50/p90/avg (ms)``; time inside delegates
        lands on the node that ran it, the rest in an ``<unattributed>`` row."""
        from .nodes import node_frame

        return node_frame(self.attribution(pte), include_units)

    def get_op_list(self, event_block: str, show_delegated_ops: Optional[bool] = True) -> Dict[str, List[Event]]:
        """``{op type: [Event, ...]}`` of the block named ``event_block`` (``OPERATOR_CALL`` rows skipped).

        Events with several op types (a fused or delegated group) appear under each; with
        ``show_delegated_ops=False`` events inside delegates are left out.
        """
        blocks = [b for b in self.event_blocks if b.name == event_block]
        if not blocks:
            names = sorted({b.name for b in self.event_blocks})
            raise EtlensError(f"no event block named {event_block!r}; blocks: {', '.join(names)}")
        out: Dict[str, List[Event]] = {}
        for block in blocks:
            for e in block.events:
                if e.name == OPERATOR_CALL or e.name in FRAMEWORK_EVENT_NAMES:
                    continue
                if not show_delegated_ops and e.is_delegated_op:
                    continue
                ops = e.op_types or ([e.name] if e.is_delegated_op or not e.op_types else [])
                for op in dict.fromkeys(ops):
                    out.setdefault(op, []).append(e)
        return out

    def runtime_intermediate_outputs(self, column: int = 0, method: Optional[str] = None) -> List[RuntimeOutput]:
        """Operator events (not ``OPERATOR_CALL``) that logged intermediate outputs, decoded lazily.

        ``column``: which run of each block (0: the first, as ExecuTorch); ``method``: that method's blocks."""
        out = []
        for bi, b in enumerate(self._blocks):
            if column >= len(b.runs) or (method is not None and self._block_methods[bi] != method):
                continue
            r0 = b.runs[column]
            n_events = len(self._dump.runs[r0].kind)
            for i, name in enumerate(b.names):
                idxs = b.debug_events[i]
                if idxs is None or name == OPERATOR_CALL or (len(idxs) and int(max(idxs.tolist())) >= n_events):
                    continue
                h = b.debug_handles[i]
                handles = () if h is None else ((h,) if isinstance(h, int) else tuple(h))
                out.append(RuntimeOutput(b.name, i, name, int(b.instruction_ids[i]), handles, b.num_outputs[i],
                                         list(b.op_types[i]), b.is_delegated[i], b.backend_names[i],
                                         self._debug_list(r0, idxs)))
        return out

    def run_debug_data(self, block: int, event: Optional[int], column: int) -> list:
        """What event ``event`` of block ``block`` (None: the method's outputs) logged in the block's
        ``column``-th run, as numpy arrays or scalars, no torch import (etlens extra; see ``run_values``)."""
        from .run_values import run_outputs, run_values

        b = self._blocks[block]
        if event is None:
            return run_outputs(self._dump, self._buffer, b, column)
        return run_values(self._dump, self._buffer, b, event, column)

    @property
    def has_debug_buffer(self) -> bool:
        """Whether a debug buffer was given (logged tensors decode to real values, not zeros)."""
        return self._buffer is not None

    @property
    def target_time_scale(self) -> TimeScale:
        """The unit the tables and ``PerfData`` report times in."""
        return self._target_time_scale

    @property
    def etdump(self) -> ETDump:
        """The parsed ETDump (columnar runs)."""
        return self._dump

    @property
    def block_columns(self) -> List[BlockColumns]:
        """The columnar event blocks behind ``event_blocks`` (for fast custom analyses)."""
        return self._blocks

    def get_exported_program(self, graph: Optional[str] = None):
        """The edge-dialect ``ExportedProgram`` (or graph-map entry ``graph``) of the ETRecord."""
        if self._etrecord is None:
            log.warning("Exported program is only available when an ETRecord was given to the Inspector")
            return None
        if graph is None:
            return self._etrecord.edge_dialect_program
        return (self._etrecord.graph_map or {}).get(graph)

    def calculate_numeric_gap(self, *args, **kwargs):
        """Per-operator numeric gap between the ETRecord reference and the runtime outputs
        (see :func:`etlens.analysis.numerics.calculate_numeric_gap`)."""
        from .. import numerics

        return numerics.calculate_numeric_gap(self, *args, **kwargs)

    def explain_unpaired(self, *args, **kwargs):
        """Why some runtime or reference outputs found no partner (see :mod:`etlens.analysis.numerics`)."""
        from .. import numerics

        return numerics.explain_unpaired(self, *args, **kwargs)

    def first_divergence(self, *args, **kwargs):
        """The earliest operator whose numeric gap passes a threshold (see :mod:`etlens.analysis.numerics`)."""
        from .. import numerics

        return numerics.first_divergence(self, *args, **kwargs)
