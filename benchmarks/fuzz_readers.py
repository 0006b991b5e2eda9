"""Fuzz every etlens reader with mutated real artifacts and group the failures by bug.

Unlike the hypothesis target in ``tests/fuzz`` (which stops at the first failure and shrinks it),
this plain seeded loop runs every input and prints one line per distinct failure signature
(exception type and innermost etlens frame), with one reproducer each — the tool for finding
*all* the bugs in one pass.

Usage::

    .venv/bin/python benchmarks/fuzz_readers.py                 # 10000 inputs per reader
    .venv/bin/python benchmarks/fuzz_readers.py -n 500 pte etdump --seed 3 --save-failures /tmp/fz

Readers: pte, etdump (mutated dump, plus a valid dump with a mutated debug buffer: every debug
tensor is decoded), etrecord, pt2, trace, graph. Seeds are the committed ``tests/data`` artifacts
plus ``--extra DIR`` (e.g. ``/tmp/fx`` or the session fixture cache) for bigger real programs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "robustness"))

import _harness as H  # noqa: E402

KINDS = ("pte", "etdump", "debug", "etrecord", "pt2", "trace", "graph")


def seeds(extra: str | None) -> dict[str, list[tuple[str, bytes]]]:
    s = H.committed_seeds()
    if extra:
        d = Path(extra)
        for p in sorted(d.glob("*")):
            kind = {".pte": "pte", ".etdp": "etdump", ".etrecord": "etrecord", ".pt2": "pt2"}.get(p.suffix)
            if kind and p.stat().st_size < 2_000_000:
                s[kind].append((p.name, p.read_bytes()))
        ptes = [str(p) for p in sorted(d.glob("*.pte"))]
        for k, v in H.json_seeds(ptes).items():
            s[k].extend(v)
    return s


def debug_pairs(extra: str | None) -> list[tuple[str, bytes, bytes]]:
    pairs = [("mlp_portable", *H.debug_seed())]
    if extra:
        for p in sorted(Path(extra).glob("*.etdp")):
            dbg = p.with_suffix(".debug.bin")
            if dbg.exists():
                # runtime buffers are mostly unused tail; keep what the events use plus slack
                pairs.append((p.stem, p.read_bytes(), dbg.read_bytes()[:1 << 20]))
    return pairs


def mutate(kind: str, rng: random.Random, label: str, data: bytes, hot: dict) -> bytes:
    r = rng.random()
    if kind in ("etrecord", "pt2") and r < 0.6:
        return H.mutate_zip(rng, data)
    if kind in ("trace", "graph") and r < 0.8:
        return H.mutate_json_text(rng, data)
    if label not in hot:
        hot[label] = H.flatbuffer_hot_positions(data) if kind in ("pte", "etdump") else []
    return H.apply_ops(data, H.random_ops(rng, len(data), hot[label]))


def run_kind(kind: str, n: int, seed: int, corpus: dict, pairs: list, work: str, save: str | None,
             quiet: bool) -> H.Stats:
    rng = random.Random(f"{seed}-{kind}")
    stats = H.Stats()
    hot: dict = {}
    t0 = time.perf_counter()
    for i in range(n):
        if kind == "debug":
            label, etdp, dbg = rng.choice(pairs)
            if rng.random() < 0.3:
                hot_positions = hot.setdefault(label, H.flatbuffer_hot_positions(etdp))
                etdp = H.apply_ops(etdp, H.random_ops(rng, len(etdp), hot_positions))
            if rng.random() < 0.5:
                dbg = dbg[:rng.randrange(len(dbg) + 1)]
            else:
                dbg = H.apply_ops(dbg, H.random_ops(rng, len(dbg), []))
            out = H.check("etdump", etdp, work, debug=dbg)
            blob = etdp
        else:
            label, data = rng.choice(corpus[kind])
            blob = mutate(kind, rng, label, data, hot)
            out = H.check(kind, blob, work)
        stats.add(out, f"{kind} #{i} from {label}")
        if out.failure and save:
            os.makedirs(save, exist_ok=True)
            Path(save, f"{kind}-{i}{H.EXT.get(kind, '.bin')}").write_bytes(blob)
        if not quiet and (i + 1) % 1000 == 0:
            print(f"  {kind}: {i + 1}/{n} ({time.perf_counter() - t0:.0f} s, {len(stats.failures)} failures)",
                  file=sys.stderr, flush=True)
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kinds", nargs="*", default=list(KINDS))
    ap.add_argument("-n", type=int, default=10_000, help="inputs per reader")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra", help="directory of more real artifacts (e.g. /tmp/fx)")
    ap.add_argument("--save-failures", help="write failing inputs here")
    ap.add_argument("--json", help="write the figures as JSON here")
    ap.add_argument("--no-memory", action="store_true", help="skip tracemalloc (faster, no heap bound)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    corpus = seeds(a.extra)
    pairs = debug_pairs(a.extra)
    figures = {}
    bad = 0
    with tempfile.TemporaryDirectory() as work:
        H.warm_up(corpus, work)  # imports (torch) outside the timed inputs
        ctx = H.memory_tracing() if not a.no_memory else open(os.devnull)
        with ctx:
            for kind in a.kinds:
                t0 = time.perf_counter()
                st = run_kind(kind, a.n, a.seed, corpus, pairs, work, a.save_failures, a.quiet)
                dt = time.perf_counter() - t0
                groups: dict[str, list[str]] = {}
                for sig, detail in st.failures:
                    groups.setdefault(sig, []).append(detail)
                bad += len(st.failures)
                figures[kind] = {"inputs": st.inputs, "results": st.results, "errors": st.errors,
                                 "failures": len(st.failures), "distinct": sorted(groups),
                                 "seconds": round(dt, 1), "slowest_s": round(st.slowest, 3),
                                 "peak_heap_mb": round(st.peak / 2 ** 20, 1)}
                print(f"{kind:9s} {st.inputs:6d} inputs  {st.results:5d} results  "
                      f"{sum(st.errors.values()):5d} EtlensError  {len(st.failures):4d} failures  "
                      f"slowest {st.slowest:.2f} s  heap peak {st.peak / 2 ** 20:.0f} MB  ({dt:.0f} s)", flush=True)
                for sig, details in sorted(groups.items()):
                    print(f"    {len(details):5d} x {sig}")
                    if not a.quiet:
                        print("      " + details[0][-1500:].replace("\n", "\n      "))
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=1, sort_keys=True))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
