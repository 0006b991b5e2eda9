"""Inside-the-delegate analysis: the instrumented build's cost vs one plain lower + run; bisect cycles.

For each model: ``plain`` is one lower + run of the production program (what ``etlens report``
does anyway), ``instrumented`` is the extra lower + run of the program with every value exposed
(goal: within 3x of plain), ``total`` is the whole analysis (export, float capture, pt2e, both
cycles, pairing). The bisect runs on the fault-injected MLP (a known answer) and reports its cycle
count next to ``ceil(log2 N) + 1``. A warm-up build runs first so import costs are not counted.

    python benchmarks/bench_inside_delegates.py                 # fault MLP int8, gpt2 fp32 + int8
    python benchmarks/bench_inside_delegates.py --models bert vit
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "src"))


def _build(name: str):
    if name.startswith("fault_"):
        from tests.report.inside.faults import BUILDERS

        model, inputs, _ = BUILDERS[name[6:]]()
        return model, inputs
    from tests.corpus import models

    return getattr(models, name)()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=["fault_mlp", "gpt2"])
    args = ap.parse_args()
    from etlens.demos import get_demo
    from etlens.report.inside import inside_delegates

    inside_delegates(*get_demo("mlp"), observe=True, progress=False)  # warm-up: imports, first lowering
    print(f"{'model':<14}{'mode':<6}{'values':>7}{'plain s':>9}{'instr. s':>10}{'ratio':>7}{'total s':>9}"
          f"{'observer max_abs':>18}")
    for name in args.models:
        for quant in ([True] if name.startswith("fault_") else [False, True]):
            model, inputs = _build(name)
            start = time.perf_counter()
            try:
                res = inside_delegates(model, inputs, quantize=quant, metric="SNR", progress=False)
            except Exception as exc:  # noqa: BLE001 - report and go on with the next model
                print(f"{name:<14}{'int8' if quant else 'fp32':<6} failed: {type(exc).__name__}: {str(exc)[:160]}")
                continue
            total = time.perf_counter() - start
            m = res.method
            ratio = m["instrumented_seconds"] / m["plain_seconds"]
            print(f"{name:<14}{'int8' if quant else 'fp32':<6}{len(res.rows):>7}{m['plain_seconds']:>9.1f}"
                  f"{m['instrumented_seconds']:>10.1f}{ratio:>6.2f}x{total:>9.1f}"
                  f"{res.observer_effect['max_abs']:>18.3g}", flush=True)
    model, inputs = _build("fault_mlp")
    res = inside_delegates(model, inputs, quantize=True, metric="SNR", threshold=10, bisect=True, observe=False,
                           progress=False)
    b = res.bisect
    print(f"bisect (fault_mlp int8, {b['candidates']} values): first crossing {b['first_crossing']} in "
          f"{b['module_path']}, {b['cycles']} lower+run cycles (ceil(log2 N) + 1 = "
          f"{math.ceil(math.log2(b['candidates'])) + 1}); agrees with the instrumented rows: {b['agrees']}")


if __name__ == "__main__":
    main()
