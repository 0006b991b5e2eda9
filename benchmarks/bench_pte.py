"""Benchmark: etlens' native ``.pte`` reader vs ExecuTorch's ``deserialize_pte_binary``.

Both parse the same 1000-layer program (``benchmarks/_artifacts.py:deep_artifacts(1000, 10)``,
built once and cached). Reported: the median of several runs of

* ``etlens parse``  — ``read_pte_bytes``: the whole Program (every value, instruction, operator,
  delegate, segment), what ``deserialize_pte_binary`` produces;
* ``etlens graphs`` — additionally building the data-flow ``Graph`` of every method;
* ``executorch``    — ``executorch.exir._serialize._program.deserialize_pte_binary`` (flatc → JSON
  → dataclasses).

Goal: etlens parse >= 10x faster than ExecuTorch. Run::

    .venv/bin/python benchmarks/bench_pte.py [--layers 1000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7, help="etlens runs (median)")
    ap.add_argument("--et-repeat", type=int, default=3, help="ExecuTorch runs (median)")
    args = ap.parse_args(argv)

    from _artifacts import deep_artifacts

    paths = deep_artifacts(args.layers, 10)
    data = open(paths.pte, "rb").read()

    from etlens.readers.pte import read_pte_bytes

    art = read_pte_bytes(data, name=paths.pte)
    plan = art.program.execution_plan[0]
    print(f"{paths.pte}: {len(data) / 1e6:.2f} MB, {len(plan.values)} values, "
          f"{len(plan.instructions())} instructions, {len(plan.operators)} operators")

    t_parse = _median(lambda: read_pte_bytes(data, name=paths.pte), args.repeat)
    t_graphs = _median(lambda: read_pte_bytes(data, name=paths.pte).graphs(), args.repeat)

    from executorch.exir._serialize._program import deserialize_pte_binary

    ref = deserialize_pte_binary(data)  # warm-up (imports, flatc extraction)
    assert len(ref.program.execution_plan[0].chains[0].instructions) == len(plan.instructions())
    t_et = _median(lambda: deserialize_pte_binary(data), args.et_repeat)

    print(f"etlens parse   {t_parse * 1e3:8.1f} ms   (median of {args.repeat})")
    print(f"etlens graphs  {t_graphs * 1e3:8.1f} ms   (parse + data-flow graph)")
    print(f"executorch     {t_et * 1e3:8.1f} ms   (deserialize_pte_binary, median of {args.et_repeat})")
    print(f"ratio          {t_et / t_parse:8.1f}x   (executorch / etlens parse; goal >= 10x)")
    print(f"ratio (graphs) {t_et / t_graphs:8.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
