"""etlens Inspector vs ``executorch.devtools.Inspector`` on the 1000-layer, 10-run dump.

Measures, each side in its own fresh subprocess (so peak RSS is that side's alone):

* ETDump parse: ``etlens.readers.etdump.read_etdump`` vs ExecuTorch's ``deserialize_from_etdump_flatcc``
  (goal: >= 50x faster);
* ``Inspector(etdump, etrecord, debug buffer) + to_dataframe()`` (goal: >= 20x faster);
* peak resident memory of the whole process (goal: <= 1/3 of ExecuTorch's).

Library imports (pandas, and torch / executorch on ExecuTorch's side) happen before the clocks
start on both sides; etlens never needs torch for this (debug tensors decode lazily).

    .venv/bin/python benchmarks/bench_inspector.py [--layers 1000] [--runs 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

_WORKER = r"""
import json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
side, etdp, etrecord, debug, repeat = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
save = sys.argv[6] if len(sys.argv) > 6 else ""
out = {}
if side == "etlens":
    import pandas  # noqa: F401  (imported up front, as ExecuTorch's Inspector module does)
    from etlens.readers.etdump import read_etdump
    from etlens.analysis.inspector import Inspector
    parse = lambda: read_etdump(etdp)
else:
    import logging; logging.disable(logging.WARNING)
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
    from executorch.devtools import Inspector
    data = open(etdp, "rb").read()
    parse = lambda: deserialize_from_etdump_flatcc(data)
best = None
for _ in range(repeat):
    t = time.perf_counter(); parse(); dt = time.perf_counter() - t
    best = dt if best is None else min(best, dt)
out["parse_s"] = best
best_i = best_df = None
for _ in range(repeat):
    t = time.perf_counter()
    insp = Inspector(etdump_path=etdp, etrecord=etrecord, debug_buffer_path=debug)
    t1 = time.perf_counter()
    df = insp.to_dataframe()
    t2 = time.perf_counter()
    if best_i is None or (t2 - t) < best_i + best_df:
        best_i, best_df = t1 - t, t2 - t1
    out["rows"] = len(df)
    del insp
    if _ < repeat - 1:
        del df
out["inspector_s"], out["dataframe_s"] = best_i, best_df
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if save:  # after the measurements: keep the frame for the cell-by-cell comparison (decodes tensors)
    df.to_pickle(save)
print("RESULT " + json.dumps(out))
"""


def run_side(side: str, paths, repeat: int, save: str = "") -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(HERE, "..", "src") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", _WORKER, side, paths.etdump, paths.etrecord, paths.debug_buffer,
                           str(repeat), save], capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{side} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3, help="etlens repetitions (best of); ExecuTorch runs once")
    ap.add_argument("--no-verify", action="store_true", help="skip comparing the two DataFrames cell by cell")
    args = ap.parse_args(argv)
    from _artifacts import deep_artifacts

    paths = deep_artifacts(args.layers, args.runs)
    sys.path.insert(0, os.path.join(HERE, "..", "src"))
    from etlens.readers.etdump import read_etdump

    dump = read_etdump(paths.etdump)
    n_events = sum(len(r) for r in dump.runs)
    print(f"dump: {paths.etdump} ({os.path.getsize(paths.etdump) / 1e6:.1f} MB, {len(dump.runs)} runs, "
          f"{n_events} events); debug buffer {os.path.getsize(paths.debug_buffer) / 1e6:.0f} MB", flush=True)
    import tempfile as _tf

    _tmp = _tf.mkdtemp(prefix="bench_inspector_")
    ours_save = "" if args.no_verify else os.path.join(_tmp, "etlens.pkl")
    ours = run_side("etlens", paths, args.repeat, ours_save)
    print(f"etlens done: {ours}", flush=True)
    import tempfile

    tmp = tempfile.mkdtemp(prefix="bench_inspector_")
    ours_pkl, theirs_pkl = ("", "") if args.no_verify else (os.path.join(tmp, "etlens.pkl"),
                                                             os.path.join(tmp, "executorch.pkl"))
    theirs = run_side("executorch", paths, 1, theirs_pkl)
    print(f"executorch done: {theirs}", flush=True)
    rows = [
        ("ETDump parse (s)", ours["parse_s"], theirs["parse_s"], 50),
        ("Inspector(...) (s)", ours["inspector_s"], theirs["inspector_s"], None),
        ("to_dataframe() (s)", ours["dataframe_s"], theirs["dataframe_s"], None),
        ("Inspector + to_dataframe (s)", ours["inspector_s"] + ours["dataframe_s"],
         theirs["inspector_s"] + theirs["dataframe_s"], 20),
    ]
    print(f"\n{'measure':32s} {'etlens':>10s} {'executorch':>12s} {'speed-up':>10s}  goal")
    for name, a, b, goal in rows:
        ok = "" if goal is None else (f">= {goal}x " + ("OK" if b / a >= goal else "MISSED"))
        print(f"{name:32s} {a:10.3f} {b:12.3f} {b / a:9.1f}x  {ok}")
    ratio = ours["peak_rss_mb"] / theirs["peak_rss_mb"]
    print(f"{'peak RSS (MB)':32s} {ours['peak_rss_mb']:10.0f} {theirs['peak_rss_mb']:12.0f} {ratio:9.2f}x  "
          f"<= 0.33x {'OK' if ratio <= 1 / 3 else 'MISSED'}")
    print(f"rows: etlens {ours['rows']}, executorch {theirs['rows']}")
    if not args.no_verify:
        import pandas as pd

        sys.path.insert(0, os.path.join(HERE, "..", "tests", "analysis", "inspector"))
        from _inspector_compare import frame_diffs

        diffs = frame_diffs(pd.read_pickle(theirs_pkl), pd.read_pickle(ours_save))
        print("DataFrames equal cell by cell (incl. debug_data tensors)" if not diffs else
              "DataFrames DIFFER:\n  " + "\n  ".join(diffs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
