"""How an :class:`~etlens.analysis.inspector.core.Inspector` links an ETDump's runs to its ETRecord.

The ETDump does not name the method a run executed, nor does it say which program it came from.
:class:`RecordLinking` (a base of ``Inspector``) does both jobs once, when the Inspector is built:
it attributes every block of events to one of the record's methods (by how well the block's
instruction ids and kernels fit each method's debug-handle map), labels the blocks of metadata
methods, resolves each event's debug handles, op types and stack traces, and warns when the record
is evidently not the one of the dump's program. The Inspector's timings and tables are in
:mod:`.core`; the per-event resolution in :mod:`.etrecord`; the method labels in :mod:`.methods`.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any, List, Optional

from ...errors import EtlensError
from ...schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES
from .etrecord import kernel_matches, method_score

__all__ = ["RecordLinking", "load_record", "FORWARD", "EDGE_DIALECT_GRAPH_KEY"]

log = logging.getLogger("etlens.analysis.inspector.core")
#: the method a record's maps are read for when nothing else says
FORWARD = "forward"
#: ``reference_graph_name`` meaning the record's edge program
EDGE_DIALECT_GRAPH_KEY = "edge_dialect_graph_module"


def load_record(etrecord: Any) -> Any:
    """The ETRecord an Inspector was given: a path (read here), a parsed ETRecord (etlens or ExecuTorch), or None."""
    if etrecord is None:
        return None
    if isinstance(etrecord, (str, os.PathLike)):
        from ...readers.etrecord import read as read_etrecord

        return read_etrecord(etrecord)
    if hasattr(etrecord, "_debug_handle_map") or hasattr(etrecord, "debug_handle_map"):
        return etrecord
    raise EtlensError(f"etrecord must be a path or a parsed ETRecord, got {type(etrecord).__name__}")


class RecordLinking:
    """The ETRecord half of the Inspector (a mixin: it reads and sets the Inspector's ``record``,
    ``pte``, ``_blocks``, ``_block_methods``, ``_method`` and ``_reference_graph_name``)."""

    record: Any
    pte: Any
    _blocks: list
    _block_methods: List[str]
    _method: Optional[str]
    _reference_graph_name: str

    def _method_name(self) -> str:
        if self._method:
            return self._method
        dhm = self.record.handle_maps() if self.record is not None else {}
        if FORWARD not in dhm and len(dhm) == 1:
            return next(iter(dhm))
        return FORWARD

    def _consume_etrecord(self) -> None:
        if self.record is None:
            return
        from .etrecord import handle_to_nodes, record_maps, resolve_block

        graph = None if self._reference_graph_name == EDGE_DIALECT_GRAPH_KEY else self._reference_graph_name
        dhm = self.record.handle_maps()
        methods = [self._method] if self._method else (list(dhm) or [FORWARD])
        self._block_methods = [self._method_name()] * len(self._blocks)
        nodes_of: dict[str, dict] = {}

        def nodes_for(m: str) -> dict:
            if m not in nodes_of:
                nodes_of[m] = handle_to_nodes(self.record, m, graph)
            return nodes_of[m]

        if len(methods) > 1:
            # multi-method program: the dump does not name the method of a run, so attribute each
            # block to the method whose instruction ids and kernels fit its events best
            for bi, block in enumerate(self._blocks):
                scores = [(method_score(block, dhm.get(m) or {}, nodes_for(m)), -k, m) for k, m in enumerate(methods)]
                best = max(scores)
                self._block_methods[bi] = best[2] if best[0] > 0 else self._method_name()
        self._label_blocks()
        checked_any = False
        for bi, block in enumerate(self._blocks):
            method = self._block_methods[bi]
            handle_map, delegate_map, num_outs = record_maps(self.record, method)
            if handle_map is None:
                continue
            checked_any = True
            resolve_block(block, handle_map, delegate_map, num_outs, nodes_for(method))
        if not checked_any:
            warnings.warn(f"ETRecord has no debug handle map for method {self._method_name()!r}; events keep their "
                          "timings but get no debug handles, op types or stack traces", stacklevel=3)
            return
        self._check_record_matches()

    def _label_blocks(self) -> None:
        """Blocks that ran no operator belong to a metadata method, not to ``forward`` (see ``methods``)."""
        from .methods import label_blocks, program_methods

        self._block_methods = label_blocks(self._blocks, self._block_methods, program_methods(self.pte, log))

    @property
    def block_methods(self) -> List[str]:
        """The method that ran each block of :attr:`block_columns` (etlens extra).

        The ETDump does not name it: blocks are matched to the ETRecord's methods by their events,
        and blocks without operator events (the metadata methods of an LLM program) are told apart
        from ``forward``; with ``pte=`` they are named when the program has one such method.
        """
        return list(self._block_methods)

    def _check_record_matches(self) -> None:
        """Warn when the ETRecord is evidently not the one of this ETDump's program."""
        from .etrecord import record_maps

        framework = FRAMEWORK_EVENT_NAMES
        missing = wrong_kernel = checked = bad_delegate = 0
        top: dict[int, int] = {}
        tops: dict[str, int] = {}  # method -> largest instruction id of its debug handle map
        verdicts: dict[tuple, Optional[bool]] = {}  # kernel_matches per (name, op types): few distinct pairs
        for bi, b in enumerate(self._blocks):
            handle_map, delegate_map, _ = record_maps(self.record, self._block_methods[bi])
            if handle_map is None:
                continue  # a method the record has no maps for (e.g. a metadata method)
            method = self._block_methods[bi]
            if method not in tops:  # blocks of one method share its map: scan its keys once
                tops[method] = max((int(k) for k in handle_map if str(k).lstrip("-").isdigit()), default=-1)
            top[bi] = tops[method]
            # one pass per event of every block: columns as Python lists, not numpy scalars
            for i, (name, instr, delegated) in enumerate(zip(b.names, b.instruction_ids.tolist(), b.is_delegated)):
                if name in framework or delegated or instr < 0:
                    continue
                if str(instr) not in handle_map:
                    # instructions of nodes without a debug handle (views, symbolic sizes, ops added
                    # after the handles were assigned, e.g. llama::update_cache) have no entry; an id
                    # past every entry means the record's program is shorter than the one that ran
                    missing += instr > top.get(bi, -1)
                    continue
                if name == DELEGATE_CALL:
                    if delegate_map is not None and str(instr) not in delegate_map:
                        bad_delegate += 1
                    continue
                key = (name, *b.op_types[i])
                ok = verdicts[key] if key in verdicts else verdicts.setdefault(key, kernel_matches(name, b.op_types[i]))
                if ok is not None:
                    checked += 1
                    wrong_kernel += not ok
        problems = []
        if missing:
            problems.append(f"{missing} operator event(s) have instruction ids the ETRecord does not know")
        if bad_delegate:
            problems.append(f"{bad_delegate} DELEGATE_CALL event(s) have no delegate entry")
        if wrong_kernel and wrong_kernel * 4 > checked:
            problems.append(f"{wrong_kernel} of {checked} kernel calls map to different operators")
        if problems:
            warnings.warn(
                "ETRecord does not match this ETDump (" + "; ".join(problems) + "): it is probably from a "
                "different model or build. Timings, event names and blocks are still right; debug handles, op "
                "types, stack traces and module hierarchy are unreliable.", stacklevel=4)

