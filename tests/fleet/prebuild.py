"""Measure the compare statistics' replicas on an otherwise idle machine, before the parallel tests start.

``python -m tests.fleet.prebuild`` (scripts/test.sh runs it before ``pytest -n 2``) builds
:func:`~tests.fleet.conftest.replicas_manifest` (same-build and planted-1.3x runtime processes), the fixture
whose *timings* tests/fleet/test_compare_stats.py judges, into the fixture cache, alone. Measured while the
other test worker lowered a transformer (or next to another fixture's build), the processes' speed
scattered 15-20 % from one to the next and the statistics judged that noise, honestly, as "same": the
fixture recorded the neighbour, not the program. The tests read the cache; a plain ``pytest`` run without
this step builds it on first use, as before.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    from tests.conftest import HAS_EXECUTORCH
    from tests.fleet.conftest import replicas_manifest

    if not HAS_EXECUTORCH:
        return 0
    t0 = time.perf_counter()
    replicas_manifest()
    print(f"timed fleet fixture (replicas) built alone: {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
