"""Measure the fleet's timed fixtures on an otherwise idle machine, before the parallel tests start.

``python -m tests.fleet.prebuild`` (scripts/test.sh runs it before ``pytest -n 2``) builds the two fixtures
whose *timings* the tests judge — :func:`~tests.fleet.conftest.fleet_manifest` (two builds, one wider
layer) and :func:`~tests.fleet.conftest.replicas_manifest` (same-build and planted-1.3x processes) — into
the fixture cache. Measured while the other test worker lowers a transformer, the runtime processes
shared two cores with it and the compare statistics judged that noise, honestly, as "same" or, with
one process a side, as a regression: the fixtures recorded the neighbour, not the program. The tests
read the cache; a plain ``pytest`` run without this step builds them on first use, as before. The two
build side by side (each is one process at a time: one per core).
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor


def main() -> int:
    from tests.conftest import HAS_EXECUTORCH
    from tests.fleet.conftest import fleet_manifest, replicas_manifest

    if not HAS_EXECUTORCH:
        return 0
    t0 = time.perf_counter()

    def timed(name_build):
        name, build = name_build
        build()
        return f"{name} {time.perf_counter() - t0:.0f} s"

    with ThreadPoolExecutor(2) as pool:  # each build runs in its own child process
        done = list(pool.map(timed, (("fleet", fleet_manifest), ("replicas", replicas_manifest))))
    print("timed fleet fixtures built: " + ", ".join(done), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
