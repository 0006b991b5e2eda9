"""Build diff speed: two 1000-op builds of one model diffed (``etlens diff DIR_A DIR_B``), target under 5 s.

The builds are ``benchmarks/_artifacts.deep_artifacts``: a 500-layer Linear+ReLU stack (1000 ATen ops),
once with the portable kernels (every op logs its own ETDump events, 10 runs) and once with XNNPACK;
each lands in its own directory (``.pte``, ``.etrecord``, ``.etdp``, debug buffer), which is what the
build diff reads. Measured: the library call (:func:`etlens.analysis.build_diff.diff_builds`, loading
both builds included) and the whole command in a fresh process (imports included), for portable vs
XNNPACK (every op moves) and portable vs itself (the identical rebuild).

    python benchmarks/bench_build_diff.py [LAYERS]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _artifacts import deep_artifacts  # noqa: E402

from etlens.analysis.build_diff import diff_builds  # noqa: E402


def main() -> int:
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    a = os.path.dirname(deep_artifacts(layers, 10).pte)
    b = os.path.dirname(deep_artifacts(layers, 10, delegate=True).pte)
    for name, (x, y) in {"portable vs xnnpack": (a, b), "portable vs itself": (a, a)}.items():
        t0 = time.perf_counter()
        d = diff_builds(x, y)
        lib = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "etlens", "diff", x, y, "--format", "json", "-o", os.devnull],
                       check=True)
        cli = time.perf_counter() - t0
        ops = (sum(r.a is not None for r in d.rows), sum(r.b is not None for r in d.rows))
        top = d.causes[0] if d.causes else None
        print(f"{name}: {ops[0]} / {ops[1]} source ops, {len(d.rows)} rows; diff_builds {lib:.2f} s, "
              f"etlens diff (fresh process) {cli:.2f} s; verdict {d.summary['verdict']}; top cause "
              f"{(top.module_path, top.kind, round(top.share, 3)) if top else None}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
