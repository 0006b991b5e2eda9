"""What a report *says*, as plain data, to compare two reports (timings left out).

:func:`report_content` takes the :class:`~etlens.report.collect.ReportData` of a report and returns
the content :mod:`etlens.report.collect` gathers, minus what a second run of the same program
measures differently (latencies, and the op table's order, which is by measured time):

* ``trace``: every snapshot's stage, graph JSON, diff and handle report (when the report has a trace);
* ``delegation``: the per-operator delegation table and the summary counts;
* ``gaps``: each numeric-gap row (AOT ops, runtime ops, gap values) and the worst gap;
* ``unpaired``: the unpaired-op explanations;
* ``ops``: the operator table's rows (name, op types, delegated, backend, runs), sorted;
* ``inside``: the inside-the-delegates rows (ops, where, shape, gaps) when the report has them.

:func:`assert_same_content` compares two such dicts, floats with a relative tolerance.
"""

from __future__ import annotations

import math
from typing import Any


def _records(df: Any) -> list[dict]:
    if df is None:
        return []
    return [{k: _plain(v) for k, v in row.items()} for row in df.to_dict("records")]


def _plain(v: Any) -> Any:
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, float) or hasattr(v, "item"):
        try:
            return float(v)
        except (TypeError, ValueError):
            return str(v)
    return v


def report_content(data: Any) -> dict[str, Any]:
    """The content of a report (see the module docstring)."""
    out: dict[str, Any] = {}
    trace = data.inputs.trace
    if trace is not None and hasattr(trace, "snapshots"):
        out["trace"] = [{"stage": s.stage, "name": s.name, "graph": s.graph.to_json(), "diff": s.diff,
                         "handles": s.handle_report, "error": s.error} for s in trace.snapshots]
    if data.delegation is not None:
        d = data.delegation
        out["delegation"] = {"table": _records(data.delegation_df),
                             "summary": [d.num_delegated_subgraphs, d.num_delegated_nodes, d.num_non_delegated_nodes]}
    if data.gap_df is not None:
        cols = [c for c in ("aot_ops", "runtime_ops", "gap") if c in data.gap_df.columns]
        out["gaps"] = _records(data.gap_df[cols])
        out["worst_gap"] = _plain(list(data.worst_gap)) if data.worst_gap else None
    if data.unpaired_df is not None:
        out["unpaired"] = _records(data.unpaired_df)
    # a delegated row's aten/module is the delegate-internal event whose time is closest to the row's
    # (report.collect._attribute): with several events of one name that pick depends on measured times
    out["ops"] = sorted((o.name, o.op_types, o.delegated, o.backend, o.runs,
                         "" if o.delegated else o.aten, "" if o.delegated else o.module) for o in data.op_latency)
    if data.inside is not None:
        keep = ("node", "aot_ops", "inside_delegate", "backend", "delegate_index", "shape", "gap", "kernel_gap",
                "debug_handles", "module_path")
        out["inside"] = [{k: _plain(r.get(k)) for k in keep} for r in data.inside.rows]
    return out


def _diffs(a: Any, b: Any, path: str, rel: float, out: list[str]) -> None:
    if len(out) > 20:
        return
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return
        if not math.isclose(a, b, rel_tol=rel, abs_tol=1e-12):
            out.append(f"{path}: {a!r} != {b!r}")
    elif isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            out.append(f"{path}: keys {sorted(set(a) ^ set(b))} differ")
        for k in set(a) & set(b):
            _diffs(a[k], b[k], f"{path}.{k}", rel, out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _diffs(x, y, f"{path}[{i}]", rel, out)
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}")


def content_diffs(a: dict, b: dict, *, rel: float = 1e-6) -> list[str]:
    """Where two report contents differ (empty when they agree; floats within ``rel``)."""
    out: list[str] = []
    _diffs(a, b, "report", rel, out)
    return out
