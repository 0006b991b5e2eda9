"""Pause Python's cyclic garbage collector while the Inspector loads or the numeric gap runs.

Loading a dump and an ETRecord allocates hundreds of thousands of small, long-lived objects (the
program JSON's dicts and strings, per-event tuples, the handle -> node tables). Every few hundred
allocations the collector walks the young objects again and, twice during a 1000-layer load, all
objects of the process (torch's and pandas' included): about half of ``Inspector(...)``'s time.
Nothing built there is a cycle that needs collecting mid-way (reference counting frees the parsed
JSON as usual), so the collector is paused for the load and runs normally again afterwards; the
next full collection happens later, once, in the caller's code (e.g. in ``to_dataframe``).

Measured (benchmarks/bench_inspector.py's etlens worker, 1000 layers, 10 runs, old and new code
alternating in fresh processes, 2-core machine, load average ~3; see docs/benchmarks-inspector.md):
``Inspector(...)`` 0.38-0.42 s -> 0.18-0.24 s; ``to_dataframe()`` 0.03 s -> 0.11-0.14 s (the one full
collection still owed); whole flow median 0.81 s -> 0.72 s. The first ``calculate_numeric_gap``
(parses the reference program JSON, then allocates thousands of tensors and rows): 0.72 s paused
vs 1.86 s with the collector running (bench_numerics.py, best of 3 fresh processes).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block (restored as it was, also on errors)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
