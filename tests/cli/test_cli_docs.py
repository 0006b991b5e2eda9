"""docs/cli.md is generated from the parsers (scripts/gen_cli_docs.py) and must be current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr + " (regenerate: python scripts/gen_cli_docs.py)"


def test_cli_reference_covers_every_subcommand():
    from etlens.cli.main import COMMANDS

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"## `etlens {name.replace('_', '-')}`" in text, name
    assert "| 3 |" in text and "--format {table,csv,tsv,json}" in text
