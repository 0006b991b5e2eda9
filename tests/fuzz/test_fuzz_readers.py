"""The long fuzz target: at least 10 000 hypothesis-driven inputs per reader.

Run with ``pytest -m fuzz tests/fuzz`` (excluded from the default suite by the ``fuzz`` marker;
``-n 2`` runs two readers at a time). ``ETLENS_FUZZ_EXAMPLES`` overrides the count,
``ETLENS_FUZZ_BUDGET_S`` stops checking inputs after that many seconds (the figures then say how many were checked);
``ETLENS_FUZZ_REPORT=dir`` writes ``<reader>.json`` figures (inputs, results, EtlensError counts,
slowest input, heap peak) for ``docs/robustness.md``.

Hypothesis draws one seed per input and the harness mutates a committed artifact with it (the
same mutation space as the structured strategies of the default-suite sample, at a fraction of
the per-input overhead). For collecting *every* failure class in one pass, use
``benchmarks/fuzz_readers.py``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.robustness import _harness as H
from tests.robustness import _strategies as S

N = int(os.environ.get("ETLENS_FUZZ_EXAMPLES", "10000"))
# longest first for -n 2
ORDER = tuple(os.environ.get("ETLENS_FUZZ_READERS", "pt2,debug,etrecord,etdump,pte,bpte,trace,graph").split(","))


@pytest.mark.fuzz
@pytest.mark.slow
@pytest.mark.parametrize("kind", ORDER)
def test_fuzz_reader(kind):
    outcomes: list[H.Outcome] = []
    t0 = time.perf_counter()
    try:
        S.seeded_property(kind, N, counter=outcomes)()
    finally:
        report = os.environ.get("ETLENS_FUZZ_REPORT")
        if report:
            st = H.Stats()
            for label, o in outcomes:
                st.add(o, label)
            Path(report).mkdir(parents=True, exist_ok=True)
            Path(report, f"{kind}.json").write_text(json.dumps({
                "reader": kind, "inputs": st.inputs, "results": st.results, "etlens_errors": st.errors,
                "failures": len(st.failures),
                "failure_samples": [f[1][-3000:] for f in st.failures[:3]],
                "seconds": round(time.perf_counter() - t0, 1),
                "slowest_cpu_s": round(st.slowest, 3), "heap_peak_mb": round(st.peak / 2 ** 20, 1)}, indent=1))
