"""Which method each event block ran, and timings per method.

An ETDump does not name the method of a run. A program exported by ExecuTorch's LLM flow has
``forward`` plus metadata methods (``get_max_seq_len``, ``use_kv_cache`` ...) that run no
operator: they return a constant. A run of one of those logs only ``Method::execute`` (and, with
intermediate outputs on, the returned value). Averaging those runs into ``forward``'s latency, or
resolving their events against ``forward``'s debug handles, gives wrong answers, so blocks are
labelled by method first:

- a block with operator events keeps the method the ETRecord's maps (or the default) give it;
- a block without operator events, when the program or another block shows that the default
  method does run operators, belongs to a method that runs none: named when the ``.pte`` has
  exactly one such method, else :data:`CONSTANT_METHODS`.

:func:`method_timings` then gives one :class:`MethodTiming` per method (all its blocks' runs
pooled, as ``Method::execute`` averages weighted by runs), and :func:`main_method` the one that did
the work (largest total time) -- the report's headline.

Example::

    from etlens.analysis.inspector.methods import method_timings, main_method
    main = main_method(method_timings(inspector))
    print(main.method, main.runs, main.execute_avg)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...model.events import BlockColumns
from ...schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE, OPERATOR_CALL

__all__ = ["CONSTANT_METHODS", "MethodTiming", "program_methods", "label_blocks", "blocks_of", "method_timings",
           "main_method", "has_operator_events"]

#: label of blocks run by methods without operators when the program has several such methods
CONSTANT_METHODS = "(constant methods)"


def has_operator_events(block: BlockColumns) -> bool:
    """Whether the block timed anything besides the framework's own events."""
    return any(bool(block.has_perf[i]) and name and name not in FRAMEWORK_EVENT_NAMES
               for i, name in enumerate(block.names))


def program_methods(pte: Any, log: Any = None) -> Optional[dict[str, int]]:
    """``{method: number of kernel and delegate calls}`` of a ``.pte`` (path or read artifact), or None
    (also when it cannot be read: then ``log`` gets a debug line)."""
    if pte is None:
        return None
    program = getattr(pte, "program", None)
    if program is None:
        from ...errors import EtlensError
        from ...readers.pte import read

        try:
            program = read(pte).program
        except EtlensError as exc:
            if log is not None:
                log.debug("could not read the program to label methods: %s", exc)
            return None
    if program is None:
        return None
    return {plan.name: sum(ins.kind in ("KernelCall", "DelegateCall") for ins in plan.instructions())
            for plan in program.execution_plan}


def blocks_of(labels: list[str], method: Optional[str], n: int) -> list[int]:
    """Indices of the blocks of ``method`` (all ``n`` blocks when None); EtlensError when none ran it."""
    if method is None:
        return list(range(n))
    keep = [i for i, m in enumerate(labels) if m == method]
    if not keep:
        from ...errors import EtlensError

        known = sorted(set(labels) - {""})
        raise EtlensError(f"no run of method {method!r} in this ETDump; methods that ran: {', '.join(known)}")
    return keep


def label_blocks(blocks: list[BlockColumns], labels: list[str], methods: Optional[dict[str, int]]) -> list[str]:
    """Relabel blocks that ran no operator (see the module docstring); returns the new labels."""
    if not blocks:
        return labels
    has_ops = [has_operator_events(b) for b in blocks]
    out = list(labels)
    opless = sorted(m for m, n in (methods or {}).items() if n == 0)
    for bi, b in enumerate(blocks):
        if has_ops[bi] or not any(n == METHOD_EXECUTE for n in b.names):
            continue  # the 'Default' load/init block, or a block of the labelled method
        current = out[bi]
        if methods is not None and methods.get(current, 1) == 0:
            continue  # already a method without operators
        if methods is not None or any(has_ops):
            out[bi] = opless[0] if len(opless) == 1 else CONSTANT_METHODS
    return out


@dataclass
class MethodTiming:
    """Timings of one method, over every run of it in the dump (times in the inspector's unit).

    ``execute_avg``: mean ``Method::execute`` per run (NaN when the dump has none);
    ``operator_avg``: summed mean time of the kernels the runtime ran itself per run;
    ``delegate_avg``: summed mean time of the ``DELEGATE_CALL`` events per run;
    ``delegated_share``: ``delegate_avg / (delegate_avg + operator_avg)`` (share of operator time).
    """

    method: str
    blocks: list[int] = field(default_factory=list)
    runs: int = 0
    execute_avg: float = math.nan
    execute_total: float = 0.0
    operator_avg: float = 0.0
    delegate_avg: float = 0.0
    run_times: list[float] = field(default_factory=list)

    @property
    def delegated_share(self) -> Optional[float]:
        total = self.operator_avg + self.delegate_avg
        return self.delegate_avg / total if total > 0 else None

    @property
    def latency(self) -> float:
        """``Method::execute`` average, or the operator sum when the dump has no execute events."""
        return self.execute_avg if not math.isnan(self.execute_avg) else self.operator_avg + self.delegate_avg


def method_timings(inspector: Any) -> list[MethodTiming]:
    """One :class:`MethodTiming` per method that executed, in order of first appearance."""
    blocks: list[BlockColumns] = inspector.block_columns
    labels = inspector.block_methods
    acc: dict[str, MethodTiming] = {}
    op_sums: dict[str, list[tuple[int, float, float]]] = {}
    for bi, b in enumerate(blocks):
        is_exec = [i for i, n in enumerate(b.names) if n == METHOD_EXECUTE and b.has_perf[i]]
        if not is_exec and not has_operator_events(b):
            continue  # load/init only
        m = acc.setdefault(labels[bi], MethodTiming(labels[bi]))
        m.blocks.append(bi)
        k = b.raw.shape[1]
        m.runs += k
        if is_exec:
            times = b.raw[is_exec[0]]
            m.run_times.extend(float(t) for t in times)
            m.execute_total += float(np.nansum(times))
        op = dl = 0.0
        for i, name in enumerate(b.names):
            if not b.has_perf[i] or not name or name in FRAMEWORK_EVENT_NAMES or name == OPERATOR_CALL \
                    or b.is_delegated[i]:
                continue
            avg = float(np.nanmean(b.raw[i]))
            if name == DELEGATE_CALL:
                dl += avg
            else:
                op += avg
        op_sums.setdefault(labels[bi], []).append((k, op, dl))
    for name, m in acc.items():
        if m.run_times:
            m.execute_avg = float(np.mean(m.run_times))
        parts = op_sums.get(name, [])
        runs = sum(k for k, _, _ in parts) or 1
        m.operator_avg = sum(k * o for k, o, _ in parts) / runs
        m.delegate_avg = sum(k * d for k, _, d in parts) / runs
    return list(acc.values())


def main_method(timings: list[MethodTiming]) -> Optional[MethodTiming]:
    """The method that did the work: the largest total time (execute, else operators x runs)."""
    if not timings:
        return None
    return max(timings, key=lambda m: (m.execute_total or m.latency * m.runs, m.runs))
