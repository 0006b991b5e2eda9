"""Small modules: no source file of etlens is over 600 lines (split a module by responsibility instead)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "etlens"
LIMIT = 600


def test_no_module_over_the_limit():
    big = sorted((n, str(p.relative_to(SRC))) for p in SRC.rglob("*.py")
                 if (n := len(p.read_text(encoding="utf-8").splitlines())) > LIMIT)
    assert not big, f"modules over {LIMIT} lines: " + ", ".join(f"{p} ({n})" for n, p in big)
