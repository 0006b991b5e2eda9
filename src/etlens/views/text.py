"""Plain-text rendering of summaries for the terminal."""

from __future__ import annotations

from typing import Any

__all__ = ["format_summary"]


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
    """Indented ``key: value`` text of a nested summary dict (as ``etlens info`` prints)."""
    lines: list[str] = []
    _fmt(summary, 0, lines)
    return "\n".join(lines) + "\n"
