"""Inside-the-delegate analysis vs upstream's ``intermediate_output_tap.tap_compare``, side by side.

For each model (fp32, XNNPACK, every op exposed):

* **etlens**: ``inside_delegates(model, inputs)`` — export, float capture, the instrumented lower +
  run in a worker child (its ``import torch`` + executorch, ~8 s of CPU, is counted), retries of
  refused values, pairing with the float model. ``cycles``: lower + run cycles it needed.
* **tap_compare**: ``executorch.devtools.intermediate_output_tap.tap_compare(model, inputs,
  [XnnpackPartitioner()])`` in its own child process (it lowers and runs in-process, and crashes
  on some models); its imports are done before its clock starts, so the comparison favours it.

Times are CPU seconds (this process + its children: ``process_time`` + ``RUSAGE_CHILDREN``), best
of ``--repeat``, because the machine is shared; wall seconds are printed too. ``ratio`` is
etlens / tap_compare (below 1: etlens is cheaper). Then, for the int8 fault MLP, the instrumented
build against one plain lower + run of the production program (goal: within 3x), and the bisect's
cycle count next to ``ceil(log2 N) + 1``.

    python benchmarks/bench_inside_delegates.py                      # convnext vit gpt2 bert
    python benchmarks/bench_inside_delegates.py --models convnext --repeat 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "src"))

_TAP = """
import json, sys, time
sys.path.insert(0, {root!r})
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.devtools.intermediate_output_tap import tap_compare
from tests.corpus import models
model, inputs = getattr(models, {name!r})()
cpu, wall = time.process_time(), time.perf_counter()
try:
    df, _ = tap_compare(model, inputs, [XnnpackPartitioner()])
    out = {{"rows": len(df)}}
except Exception as exc:
    out = {{"error": (type(exc).__name__ + ": " + str(exc).splitlines()[0])[:160] if str(exc) else type(exc).__name__}}
out.update(cpu=time.process_time() - cpu, wall=time.perf_counter() - wall)
print("RESULT " + json.dumps(out))
"""


def _cpu() -> float:
    return time.process_time() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime + \
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime


def _build(name: str):
    if name.startswith("fault_"):
        from tests.builder.inside.faults import BUILDERS

        model, inputs, _ = BUILDERS[name[6:]]()
        return model, inputs
    from tests.corpus import models

    return getattr(models, name)()


def etlens_once(name: str) -> dict:
    from etlens.builder.inside import inside_delegates

    model, inputs = _build(name)
    cpu, wall = _cpu(), time.perf_counter()
    try:
        res = inside_delegates(model, inputs, metric="SNR", observe=False, progress=False)
    except Exception as exc:  # noqa: BLE001 - report and go on
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    inside = sum(1 for r in res.rows if r["inside_delegate"])
    return {"cpu": _cpu() - cpu, "wall": time.perf_counter() - wall, "rows": len(res.rows), "inside": inside,
            "cycles": res.method["cycles"], "unexposed": len(res.method["unexposed"])}


def tap_once(name: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _TAP.format(root=os.path.abspath(ROOT), name=name)],
                          capture_output=True, text=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": f"crashed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1][:120]}"
                if proc.stderr.strip() else f"crashed (exit {proc.returncode})"}
    return json.loads(line[7:])


def _best(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    return min(ok, key=lambda r: r["cpu"]) if ok else runs[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=["convnext", "vit", "gpt2", "bert"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-fault", action="store_true", help="skip the int8 fault MLP (plain vs instrumented, bisect)")
    args = ap.parse_args()

    print(f"{'model':<10}{'etlens cpu s':>13}{'wall s':>8}{'values':>8}{'cycles':>7}"
          f"{'tap cpu s':>11}{'wall s':>8}{'rows':>6}{'ratio':>8}  tap_compare")
    for name in args.models:
        ours = _best([etlens_once(name) for _ in range(args.repeat)])
        theirs = _best([tap_once(name) for _ in range(args.repeat)])
        if "error" in ours:
            print(f"{name:<10} etlens failed: {ours['error']}")
            continue
        ratio = f"{ours['cpu'] / theirs['cpu']:.2f}x" if "error" not in theirs else "-"
        tap = (f"{theirs['cpu']:>11.1f}{theirs['wall']:>8.1f}{theirs['rows']:>6}" if "error" not in theirs
               else f"{'-':>11}{'-':>8}{'-':>6}")
        print(f"{name:<10}{ours['cpu']:>13.1f}{ours['wall']:>8.1f}{ours['inside']:>8}{ours['cycles']:>7}{tap}"
              f"{ratio:>8}  {theirs.get('error', 'ok')}", flush=True)
    if args.no_fault:
        return

    from etlens.builder.inside import inside_delegates

    model, inputs = _build("fault_mlp")
    res = inside_delegates(model, inputs, quantize=True, metric="SNR", threshold=10, bisect=True, observe=True,
                           progress=False)
    m, b = res.method, res.bisect
    each = m["cycle_seconds"]
    print(f"fault_mlp int8: plain lower+run {each[0]:.1f} s (starts the worker child: its imports), instrumented "
          f"{each[1]:.1f} s ({each[1] / each[0]:.2f}x); observer effect max_abs {res.observer_effect['max_abs']:.3g}")
    print(f"bisect ({b['candidates']} values): first crossing {b['first_crossing']} in {b['module_path']}, "
          f"{b['cycles']} lower+run cycles (ceil(log2 N) + 1 = {math.ceil(math.log2(b['candidates'])) + 1}), "
          f"{sum(each[2:]) / max(1, len(each) - 2):.1f} s each; agrees with the instrumented rows: {b['agrees']}")


if __name__ == "__main__":
    main()
