"""Determinism: the same input gives byte-identical output, run to run.

``_determinism_job.py`` writes graph JSON (.pte, .etrecord), trace JSON (and its read-back
round trip), viewer HTML (single, compare, passes), the report HTML, Model Explorer JSON,
Perfetto JSON and ``etlens info --json`` for the committed artifacts. It runs in two processes
with different ``PYTHONHASHSEED`` values (set and dict ordering by hash would show) into two
different directories (an output that embeds its own path would show); every file must match.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

JOB = Path(__file__).with_name("_determinism_job.py")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    dirs, procs = [], []
    for seed in ("1", "2"):  # both at once: two cores
        out = tmp_path_factory.mktemp(f"run{seed}") / f"outputs_{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        procs.append(subprocess.Popen([sys.executable, str(JOB), str(out)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env))
        dirs.append(out)
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-4000:]
    return dirs


EXPECTED = ["trace.json", "trace.roundtrip.json", "viewer.html", "compare.html", "passes.html", "report.html",
            "model_explorer.json", "perfetto.json", "info.mlp_xnnpack.pte.json", "info.mlp_xnnpack.etrecord.json",
            "info.mlp_portable.etdp.json", "info.mlp_portable.pt2.json"]


def test_every_output_was_written(two_runs):
    names = {p.name for p in two_runs[0].iterdir()}
    assert set(EXPECTED) <= names, set(EXPECTED) - names
    assert sum(n.endswith(".graph.json") for n in names) >= 3


def test_outputs_are_byte_identical(two_runs):
    a, b = two_runs
    names = sorted(p.name for p in a.iterdir() if p.is_file())
    assert names == sorted(p.name for p in b.iterdir() if p.is_file())
    differ = [n for n in names if (a / n).read_bytes() != (b / n).read_bytes()]
    assert not differ, f"outputs differ between runs: {differ}"


def test_trace_json_round_trip_is_byte_stable(two_runs):
    a = two_runs[0]
    assert (a / "trace.json").read_bytes() == (a / "trace.roundtrip.json").read_bytes()


def test_outputs_do_not_embed_run_directories(two_runs):
    a, _ = two_runs
    for n in ("viewer.html", "compare.html", "passes.html", "report.html", "model_explorer.json",
              "perfetto.json"):
        text = (a / n).read_text(encoding="utf-8", errors="replace")
        assert str(a) not in text, f"{n} embeds its output directory"
