"""Benchmark: ``etlens report`` vs ``etlens inspect`` on LLM artifacts from ExecuTorch's export_llama.

The artifacts are the LLM corpus of ``tests/llm/build.py`` (export_llama with tiny random-weight
params, XNNPACK, KV cache with the custom SDPA / update_cache ops, a prefill and decode steps run
with ETDump and a debug buffer), built once into ``$ETLENS_FIXTURE_CACHE/llm-<hash>/`` (or given
with ``--corpus DIR``). For each case, whole processes, medians of ``--repeat`` runs:

* ``inspect``: ``etlens inspect --etdump --etrecord --debug-buffer --pte`` (table + summary + LLM line);
* ``inspect --llm``: the LLM view alone;
* ``report``: ``etlens report`` with the same files (every section: LLM, latency, delegation,
  graphs with overlays, memory with the KV cache, size, Perfetto trace).

Goal: report within 2x of inspect. For whole-process timings side by side, ``farm-bench`` is the
reference (the numbers in docs/llm.md)::

    farm-bench -n 5 --vs "etlens inspect --etdump E --etrecord R --debug-buffer B --pte P" -- \\
        etlens report --etdump E --etrecord R --debug-buffer B --pte P -o /tmp/r.html

Run::

    .venv/bin/python benchmarks/bench_llm.py [--corpus DIR] [--repeat 3] [--case fp32_dynamic]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _corpus(path: str | None) -> str:
    if path:
        return path
    sys.path.insert(0, ROOT)
    from tests.llm.conftest import llm_corpus_dir

    return str(llm_corpus_dir())


def _time(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", help="directory with manifest.json (default: build/reuse the cached corpus)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--case", action="append", help="case name (default: all)")
    args = ap.parse_args(argv)
    corpus = _corpus(args.corpus)
    manifest = json.load(open(os.path.join(corpus, "manifest.json")))
    etlens = [sys.executable, "-m", "etlens"]
    print(f"{'case':<16} {'inspect s':>10} {'inspect --llm s':>16} {'report s':>9} {'report/inspect':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.case or sorted(manifest):
            e = manifest[name]
            files = ["--etdump", os.path.join(corpus, e["etdump"]), "--etrecord", os.path.join(corpus, e["etrecord"]),
                     "--debug-buffer", os.path.join(corpus, e["debug_buffer"]), "--pte", os.path.join(corpus, e["pte"])]
            t_inspect = _time([*etlens, "inspect", *files], args.repeat)
            t_llm = _time([*etlens, "inspect", *files, "--llm"], args.repeat)
            t_report = _time([*etlens, "report", *files, "-o", os.path.join(tmp, f"{name}.html")], args.repeat)
            print(f"{name:<16} {t_inspect:>10.2f} {t_llm:>16.2f} {t_report:>9.2f} {t_report / t_inspect:>14.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
