"""Plain-text rendering of summaries for the terminal (what ``etlens info`` prints).

``format_summary`` renders any reader's summary dict as indented ``key: value`` text; formats
with a dedicated layout (``.pte`` programs) get a compact, human-first view instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["format_summary", "format_bytes"]


def format_bytes(n: float | None) -> str:
    """``1536`` -> ``'1.5 KiB'``; ``-2048`` -> ``'-2.0 KiB'``; ``None`` -> ``'?'`` (binary units, B to GiB)."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _counts(items: dict[str, int], limit: int = 12) -> str:
    parts = [f"{k} ×{v}" if v > 1 else k for k, v in list(items.items())[:limit]]
    if len(items) > limit:
        parts.append(f"… {len(items) - limit} more")
    return ", ".join(parts)


def _format_pte(s: dict[str, Any]) -> str:
    lines = [
        f"{s.get('path')}: ExecuTorch program (.pte), {format_bytes(s.get('file_size'))}, version {s.get('version')}",
        f"  program {format_bytes(s.get('program_size'))}; {s.get('num_segments', 0)} segments "
        f"({format_bytes(s.get('segment_data_size'))}); constants {format_bytes(s.get('constant_data_size'))} in "
        f"{s.get('num_constant_buffers', 0)} buffers; named data {s.get('num_named_data', 0)} entries "
        f"({format_bytes(s.get('named_data_size'))})",
    ]
    for m in s.get("methods", []):
        kinds = ", ".join(f"{v} {k}" for k, v in m.get("instructions", {}).items())
        lines += [
            "",
            f"method {m['name']}: {m['num_instructions']} instructions ({kinds or 'none'}), "
            f"{m.get('num_values', 0)} values, {m.get('num_chains', 0)} chain(s)",
            f"  inputs: values {', '.join(map(str, m.get('inputs', []))) or '-'}; "
            f"outputs: values {', '.join(map(str, m.get('outputs', []))) or '-'}",
            f"  nodes: {m.get('nodes', 0)} ({', '.join(f'{k} {v}' for k, v in m.get('by_category', {}).items())})",
        ]
        ops = m.get("operators", [])
        calls = m.get("operator_calls", {})
        lines.append(f"  operators ({len(ops)}):")
        width = max((len(o) for o in ops), default=0)
        lines += [f"    {o.ljust(width)}  ×{calls.get(o, 0)}" for o in ops] or ["    (none)"]
        delegates = m.get("delegates", [])
        by_backend = m.get("delegates_by_backend", {})
        summary = "; ".join(f"{b} ×{v['count']}, {format_bytes(v['payload_size'])}" for b, v in by_backend.items())
        lines.append(f"  delegates ({len(delegates)}){': ' + summary if summary else ''}")
        for d in delegates:
            where = f"{d.get('location', '').lower()} {d.get('data_index')}"
            ops_text = _counts(d.get("op_counts") or {op: 1 for op in d.get("ops", [])})
            n_ops = len(d.get("ops", []))
            inside = f"{n_ops} op{'s' if n_ops != 1 else ''}: {ops_text}" if n_ops else \
                (f"payload not decoded ({d['decode_error']})" if d.get("decode_error") else
                 _backend_line(d) or "payload not decoded")
            size = format_bytes(d.get("payload_size"))
            lines.append(f"    [{d['index']}] {d['backend_id']}  {size}  {where}  {inside}")
            if d.get("compile_specs"):
                lines.append("        compile specs: " + ", ".join(f"{k}={v}" for k, v in d["compile_specs"].items()))
    lines += ["", f"debug handles: {s.get('debug_handles', 'n/a')}"]
    return "\n".join(lines) + "\n"


def _backend_line(d: dict[str, Any]) -> str | None:
    """One line for a delegate whose backend describes its decoded payload (its ``text`` hook's
    ``delegate_line``, given the facts the summary holds under the backend's key)."""
    from ..backends import for_delegate, hook

    backend = for_delegate(d.get("backend_id"))
    line = getattr(hook(backend, "text"), "delegate_line", None)
    facts = d.get(backend.attrs_key) if backend is not None else None
    return line(facts) if line and facts else None


def _fmt(value: Any, indent: int, lines: list[str], key: str | None = None) -> None:
    pad = "  " * indent
    label = f"{pad}{key}: " if key is not None else pad
    if isinstance(value, dict):
        if not value:
            lines.append(f"{label}(none)")
            return
        if key is not None:
            lines.append(f"{pad}{key}:")
        for k, v in value.items():
            _fmt(v, indent + (1 if key is not None else 0), lines, str(k))
    elif isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            lines.append(f"{label}{', '.join(str(v) for v in value) if value else '(none)'}")
        else:
            lines.append(f"{pad}{key}:" if key is not None else pad)
            for i, v in enumerate(value):
                _fmt(v, indent + 1, lines, f"[{i}]")
    else:
        lines.append(f"{label}{value}")


def format_summary(summary: dict[str, Any]) -> str:
    """Readable text of a summary dict (as ``etlens info`` prints).

    ``.pte`` summaries get a compact layout; every other format is rendered generically as
    indented ``key: value`` lines, so new readers show up without touching this module.
    """
    if summary.get("format") == "pte" and "methods" in summary:
        return _format_pte(summary)
    lines: list[str] = []
    _fmt(summary, 0, lines)
    return "\n".join(lines) + "\n"
