"""Pause Python's cyclic garbage collector while an Inspector is built.

Loading a dump and an ETRecord allocates hundreds of thousands of small, long-lived objects (the
program JSON's dicts and strings, per-event tuples, the handle -> node tables). Every few hundred
allocations the collector walks the young objects again and, twice during a 1000-layer load, all
objects of the process (torch's and pandas' included): about half of ``Inspector(...)``'s time.
Nothing built there is a cycle that needs collecting mid-way (reference counting frees the parsed
JSON as usual), so the collector is paused for the load and runs normally again afterwards; the
next full collection happens later, once, in the caller's code (e.g. in ``to_dataframe``).

Measured (benchmarks/bench_inspector.py's flow, 1000 layers, 10 runs, 2-core machine, load
average ~3): ``Inspector(...)`` 0.43-0.47 s -> 0.19-0.21 s, whole flow 0.82-0.92 s -> 0.67-0.72 s.
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
