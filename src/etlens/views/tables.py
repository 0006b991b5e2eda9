"""Text tables and the one-paragraph profile summary of an :class:`~etlens.analysis.inspector.Inspector`.

Example::

    from etlens.views.tables import summary_paragraph
    print(summary_paragraph(inspector))
"""

from __future__ import annotations

import sys
from typing import IO

import numpy as np
from ..schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE, OPERATOR_CALL

__all__ = ["display_or_print_df", "summary_paragraph", "op_totals", "op_key"]

_FRAMEWORK = FRAMEWORK_EVENT_NAMES


def display_or_print_df(df, file: IO[str] = sys.stdout) -> None:
    """Show ``df`` in a notebook when IPython is running, else print a boxed text table."""
    try:
        from IPython import get_ipython

        if get_ipython() is not None:
            from IPython.display import display

            display(df)
            return
    except ImportError:
        pass
    from tabulate import tabulate

    print(tabulate(df, headers="keys", tablefmt="fancy_grid"), file=file)


def op_key(name: str, op_types: list[str]) -> str:
    """The op type an event stands for: the one its kernel name mentions (a decomposed linear is
    ``permute_copy`` + ``addmm`` but runs as ``native_call_addmm.out``), else the first, else the name."""
    if not op_types:
        return name
    kernel = name[len("native_call_"):].split(".")[0] if name.startswith("native_call_") else name
    for op in op_types:
        parts = op.split(".")
        base = parts[-2] if len(parts) >= 2 else op
        if base and base == kernel:
            return op
    for op in op_types:
        parts = op.split(".")
        base = parts[-2] if len(parts) >= 2 else op
        if base and base in kernel:
            return op
    return op_types[-1]


def op_totals(inspector, blocks: "set[int] | None" = None) -> list[tuple[str, float, int]]:
    """``[(op type or event name, total avg time, events)]`` over all blocks (or the block indices
    ``blocks``), largest first.

    Uses operator events only (not ``OPERATOR_CALL``, not framework events, not delegate-internal
    events, whose time is already inside their ``DELEGATE_CALL``).
    """
    totals: dict[str, list] = {}
    for bi, b in enumerate(inspector.block_columns):
        if blocks is not None and bi not in blocks:
            continue
        stats = b.stats()
        for i, name in enumerate(b.names):
            if name == OPERATOR_CALL or name in _FRAMEWORK or b.is_delegated[i] or not b.has_perf[i]:
                continue
            if name == DELEGATE_CALL:
                key = f"DELEGATE_CALL ({b.backend_names[i] or 'delegate'})"
            else:
                key = op_key(name, b.op_types[i])
            t = totals.setdefault(key, [0.0, 0])
            t[0] += float(stats[i, 3])
            t[1] += 1
    return sorted(((k, v[0], v[1]) for k, v in totals.items()), key=lambda x: -x[1])


def summary_paragraph(inspector, top: int = 5) -> str:
    """Total time per block, the top operators and the delegated share of time, in one paragraph.

    In a program with several methods (an LLM's ``forward`` plus its metadata methods) each block
    names its method, and the top operators and the delegated share are those of the method that
    did the work (the report's headline method), never mixed across methods.
    """
    from ..analysis.inspector.methods import main_method, method_timings

    unit = inspector.target_time_scale.value
    labels = getattr(inspector, "block_methods", None) or []
    timings = method_timings(inspector) if labels else []
    multi = len(timings) > 1
    parts = []
    for bi, b in enumerate(inspector.block_columns):
        stats = b.stats()
        runs = len(b.runs)
        execute = [i for i, n in enumerate(b.names) if n == METHOD_EXECUTE and b.has_perf[i]]
        if execute:
            total = float(stats[execute[0], 3])
            how = "Method::execute avg"
        else:
            ops = [i for i, n in enumerate(b.names) if n not in _FRAMEWORK and n != OPERATOR_CALL
                   and not b.is_delegated[i] and b.has_perf[i]]
            if not ops:  # e.g. the 'Default' block: only load/init events
                ops = [i for i, n in enumerate(b.names) if b.has_perf[i]]
            total = float(np.nansum(stats[ops, 3])) if ops else 0.0
            how = "sum of event avgs"
        method = f" of {labels[bi]}" if multi and any(bi in m.blocks for m in timings) else ""
        parts.append(f"block '{b.name}'{method} ({runs} run{'s' if runs != 1 else ''}, {len(b)} events): "
                     f"{total:.4g} {unit} ({how})")
    main = main_method(timings) if multi else None
    totals = op_totals(inspector, set(main.blocks) if main is not None else None)
    grand = sum(t for _, t, _ in totals)
    delegated = sum(t for k, t, _ in totals if k.startswith(DELEGATE_CALL))
    text = "; ".join(parts) + "."
    if main is not None:
        text += (f" Main method '{main.method}': {main.latency:.4g} {unit} per run over {main.runs} runs"
                 " (the headline; other methods not averaged in).")
    if totals:
        tops = ", ".join(f"{k} {t:.4g} {unit} ({100 * t / grand:.0f}%, {n} call{'s' if n != 1 else ''})"
                         for k, t, n in totals[:top]) if grand > 0 else ", ".join(k for k, _, _ in totals[:top])
        text += f" Top operators{' of ' + main.method if main is not None else ''} by average time: {tops}."
        share = main.delegated_share if main is not None else (delegated / grand if grand > 0 else None)
        if share is not None:
            text += f" Delegated share of operator time: {100 * share:.1f}%."
    return text
