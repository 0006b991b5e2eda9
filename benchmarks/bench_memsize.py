"""Benchmark: etlens memory / size / diff analyses vs ExecuTorch's ``deserialize_pte_binary`` / ``diff_pte``.

On the 1000-layer program of ``benchmarks/_artifacts.py:deep_artifacts(1000, 10)`` (built once and
cached), the median of several runs of

* ``memory``  — ``analyze_memory`` (parse + lifetimes + live bytes per instruction + overlaps);
* ``size``    — ``analyze_size`` (parse + byte-exact layout of the FlatBuffer and segments);
* ``executorch parse`` — ``deserialize_pte_binary`` alone, the anchor (it only parses);
* ``diff`` vs ``diff_pte`` — the program against a copy of itself with one byte of constant data changed.

Goal: memory and size each faster than ExecuTorch's parse alone. Run::

    .venv/bin/python benchmarks/bench_memsize.py [--layers 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
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
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    from _artifacts import deep_artifacts

    from etlens.analysis.memory import analyze_memory
    from etlens.analysis.program_diff import diff_programs
    from etlens.analysis.size import analyze_size
    from etlens.readers.pte import read_pte_bytes

    pte = deep_artifacts(args.layers, 10).pte
    data = open(pte, "rb").read()
    t_mem = _median(lambda: analyze_memory(read_pte_bytes(data, pte)), args.repeat)
    t_size = _median(lambda: analyze_size(data, pte), args.repeat)
    from executorch.devtools.pte_tool.diff_pte import diff_pte
    from executorch.exir._serialize._program import deserialize_pte_binary

    t_et = _median(lambda: deserialize_pte_binary(data), max(1, args.repeat // 2))
    other = bytearray(data)
    other[-9] ^= 1
    with tempfile.TemporaryDirectory() as d:
        b = os.path.join(d, "b.pte")
        open(b, "wb").write(bytes(other))
        t_diff = _median(lambda: diff_programs(pte, b), max(1, args.repeat // 2))
        t_ref = _median(lambda: diff_pte(data, bytes(other)), 1)
    print(f"{args.layers}-layer program, {len(data)} bytes")
    print(f"  etlens memory      {t_mem * 1000:9.1f} ms")
    print(f"  etlens size        {t_size * 1000:9.1f} ms")
    print(f"  executorch parse   {t_et * 1000:9.1f} ms   (anchor: deserialize_pte_binary)")
    print(f"  etlens diff        {t_diff * 1000:9.1f} ms   (with memory and size deltas)")
    print(f"  executorch diff    {t_ref * 1000:9.1f} ms   (diff_pte)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
