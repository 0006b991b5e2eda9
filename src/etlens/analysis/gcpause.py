"""Pause Python's cyclic garbage collector while the Inspector loads, builds its DataFrame or runs the gap.

Loading a dump and an ETRecord allocates hundreds of thousands of small, long-lived objects (the
program JSON's dicts and strings, per-event tuples, the handle -> node tables). Every few hundred
allocations the collector walks the young objects again and, twice during a 1000-layer load, all
objects of the process (torch's and pandas' included): about half of ``Inspector(...)``'s time.
Nothing built there is a cycle that needs collecting mid-way (reference counting frees the parsed
JSON as usual), so the collector is paused for the load and runs normally again afterwards.

The same holds for ``to_dataframe`` (a list or two and a dict per row, all kept by the frame) and
the numeric gap. Each pause ends with one young-generation pass instead of one per 700 objects;
CPython owes a full pass (gen 2: every object of the process, ~0.17-0.19 s with torch and pandas
loaded) after 11 passes of the middle generation, so with the three phases paused it no longer
falls inside ``Inspector(...) + to_dataframe() + calculate_numeric_gap()`` (it did, in the gap, when
the DataFrame was built with the collector running: 3 middle-generation passes there). It happens
later, once, in the caller's code when it goes on allocating (never, in a command that exits).

Measured (benchmarks/bench_inspector.py's etlens worker, 1000 layers, 10 runs, old and new code
alternating in fresh processes, 2-core machine, load average ~3; see docs/benchmarks-inspector.md):
``Inspector(...)`` 0.38-0.42 s -> 0.18-0.24 s; ``to_dataframe()`` 0.03 s -> 0.11-0.14 s (the one full
collection still owed); whole flow median 0.81 s -> 0.72 s. The first ``calculate_numeric_gap``
(parses the reference program JSON, then allocates thousands of tensors and rows): 0.72 s paused
vs 1.86 s with the collector running (bench_numerics.py, best of 3 fresh processes).
Pausing ``to_dataframe`` too (2026-11-26, same worker, fresh processes): the gap 0.43-0.58 s with the
full pass inside it -> 0.31-0.49 s without; the pass's own time, 0.17-0.19 s, seen by ``gc.callbacks``.
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
