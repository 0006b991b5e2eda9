"""``calculate_numeric_gap``: etlens vs ``executorch.devtools`` on the 1000-layer model, side by side.

Each side runs in its own fresh subprocess on the same files (``_artifacts.deep_artifacts(1000, 10)``:
portable kernels, 10 runs, intermediate outputs in a debug buffer). Libraries (torch, pandas,
executorch) are imported and the ``Inspector`` is constructed *before* the clock starts; the clock
covers only ``calculate_numeric_gap("MSE")``: for ExecuTorch that is the reference run, the runtime
selection, the O(N^2) overlap graph and the comparison (its ETRecord programs were already
deserialized by its constructor); for etlens it is everything, including reading the reference
program from the ETRecord (etlens loads it lazily, on this first call). A second etlens call (metric
change, reference cached) is printed too. Both tables are checked to be the same rows.

    .venv/bin/python benchmarks/bench_numerics.py [--layers 1000] [--runs 10] [--metric MSE] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

_WORKER = r"""
import json, logging, sys, time, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
side, etdp, etrecord, debug, metric, out_path = sys.argv[1:7]
import pandas, torch  # noqa: F401
if side == "etlens":
    from etlens.analysis.inspector import Inspector
else:
    from executorch.devtools import Inspector
t = time.perf_counter()
insp = Inspector(etdump_path=etdp, etrecord=etrecord, debug_buffer_path=debug)
construct = time.perf_counter() - t
t = time.perf_counter()
df = insp.calculate_numeric_gap(metric)
gap = time.perf_counter() - t
res = {"construct_s": construct, "gap_s": gap, "rows": len(df),
       "handles": [list(h) for h in df["aot_debug_handle"]], "ops": [list(o) for o in df["aot_ops"]],
       "gaps": [[float(x) for x in g] for g in df["gap"]]}
if side == "etlens":
    t = time.perf_counter()
    insp.calculate_numeric_gap("L1" if metric != "L1" else "MSE")
    res["gap_again_s"] = time.perf_counter() - t
json.dump(res, open(out_path, "w"))
"""


def _run(side: str, paths, metric: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _WORKER, side, paths.etdump, paths.etrecord, paths.debug_buffer,
                           metric, out], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{side} worker failed:\n{proc.stderr[-3000:]}")
    with open(out) as f:
        res = json.load(f)
    os.unlink(out)
    return res


def _same_rows(a: dict, b: dict) -> bool:
    if a["handles"] != b["handles"] or a["ops"] != b["ops"]:
        return False
    for ga, gb in zip(a["gaps"], b["gaps"]):
        for x, y in zip(ga, gb):
            if not (x == y or abs(x - y) <= 1e-6 * max(abs(x), abs(y))):
                return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--metric", default="MSE")
    ap.add_argument("--repeat", type=int, default=1,
                    help="fresh processes per side; the best time of each side is shown (ExecuTorch's takes minutes)")
    args = ap.parse_args()

    from _artifacts import deep_artifacts

    # Compare like with like: ExecuTorch's wheel was byte-compiled when pip installed it, and a
    # regular `pip install etlens` byte-compiles etlens too. An editable install run with
    # PYTHONDONTWRITEBYTECODE=1 would instead recompile every numerics module inside the timed call.
    import compileall

    compileall.compile_dir(os.path.join(HERE, "..", "src", "etlens"), quiet=1)
    paths = deep_artifacts(args.layers, args.runs)
    ours = theirs = None
    for _ in range(max(1, args.repeat)):  # alternate the sides so both see the same machine load
        o = _run("etlens", paths, args.metric)
        t = _run("executorch", paths, args.metric)
        ours = o if ours is None or o["gap_s"] < ours["gap_s"] else ours
        theirs = t if theirs is None or t["gap_s"] < theirs["gap_s"] else theirs
    ratio = theirs["gap_s"] / ours["gap_s"] if ours["gap_s"] else float("inf")
    print(f"calculate_numeric_gap({args.metric!r}) on {args.layers} layers, {args.runs} runs "
          f"({ours['rows']} op groups)")
    print(f"  {'':28s}{'executorch':>12s}{'etlens':>12s}{'ratio':>10s}")
    print(f"  {'calculate_numeric_gap (s)':28s}{theirs['gap_s']:12.3f}{ours['gap_s']:12.3f}{ratio:9.1f}x")
    print(f"  {'  again, other metric (s)':28s}{'':12s}{ours['gap_again_s']:12.3f}"
          f"{theirs['gap_s'] / ours['gap_again_s']:9.1f}x")
    print(f"  {'(Inspector(...) before, s)':28s}{theirs['construct_s']:12.3f}{ours['construct_s']:12.3f}")
    e2e_t, e2e_o = theirs["construct_s"] + theirs["gap_s"], ours["construct_s"] + ours["gap_s"]
    print(f"  {'Inspector(...) + gap (s)':28s}{e2e_t:12.3f}{e2e_o:12.3f}{e2e_t / e2e_o:9.1f}x")
    print(f"  rows equal: {_same_rows(theirs, ours)}  (goal: >= 20x faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
