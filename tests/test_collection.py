"""Every test file on disk runs in the README's test command, and every heavy test in the second tier.

pytest skips some folder names by default (``norecursedirs``: ``build``, ``dist``, ``venv``, …), a
module whose tests are all marked ``slow`` or ``corpus`` runs only in the second tier, and a typo in a
file name (``tests_x.py``) hides a module entirely. This test asks pytest itself which test items the
first tier (``scripts/test.sh``: ``-m "not fuzz and not corpus and not slow"``) collects and fails for
every ``tests/**/test_*.py`` with no item there: each module keeps at least one fast case, so a change
that breaks a module is seen before the heavy corpora run. It also checks the tiers' marker expressions
in ``scripts/test.sh`` are the ones this test uses.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIER1 = "not fuzz and not corpus and not slow"
#: test files that exist only for the fuzzing target (run with -m fuzz, never in a tier)
FUZZ_ONLY = {"tests/fuzz/test_fuzz_readers.py"}


def _collected(marker: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-m", marker, "tests"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 5), f"collection failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    files = set()
    for line in proc.stdout.splitlines():
        if "::" in line:
            files.add(line.split("::", 1)[0])
    return files


def _on_disk() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
            if not any(part.startswith(".") for part in p.parts)}


def test_every_test_file_runs_in_the_first_tier():
    collected = _collected(TIER1)
    missing = sorted(_on_disk() - collected - FUZZ_ONLY)
    assert not missing, ("these test files have no test in the README's test command (scripts/test.sh, "
                         f"-m '{TIER1}'): give each a fast case or fix its name/folder: {missing}")


def test_the_test_command_uses_these_tiers():
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert re.search(re.escape(f'tier1="{TIER1}"'), script), "scripts/test.sh: tier 1 marker expression changed"
    assert 'heavy="(slow or corpus) and not fuzz"' in script
