"""``etlens report --model`` against the plain ExecuTorch flow it wraps, whole processes, side by side.

The plain flow (``--side plain``) is what a user pays without etlens, in one fresh process:
``torch.export.export`` → ``to_edge_transform_and_lower(XnnpackPartitioner, generate_etrecord=True)``
→ ``to_executorch`` → write ``.pte`` + ``.etrecord`` → load in the ExecuTorch runtime with ETDump
and a debug buffer (intermediate outputs, sized as etlens sizes it) → 5 runs → write ``.etdp`` +
debug buffer → ``executorch.devtools.Inspector(...)`` + ``to_dataframe()``.

The etlens side is the real command line, ``etlens report --model tests/corpus/models.py:NAME``:
the default report (pass trace and inside-the-delegates on; goal: within 1.5x of the plain flow)
and ``--no-trace --no-inside-delegates`` (goal: within 1.1x). Both sides are timed from outside,
start-up included, and run interleaved (plain, default, lean, plain, default, lean …) so a busy
machine slows all of them alike; the median of each is reported.

Usage::

    python benchmarks/bench_report.py                         # ds_cnn, resnet, bert; 3 rounds
    python benchmarks/bench_report.py --models bert --rounds 5
    python benchmarks/bench_report.py --side plain --model bert --out /tmp/x   # one plain run
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "models.py"
MODELS = ["ds_cnn", "resnet", "bert"]


def _build(name: str):
    spec = importlib.util.spec_from_file_location("corpus_models", CORPUS)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["corpus_models"] = mod  # dataclasses look their module up
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return getattr(mod, name)()


def plain(name: str, out: str, runs: int = 5) -> None:
    """The plain ExecuTorch flow (what a user runs without etlens)."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools import Inspector
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from etlens.builder.debug_buffer import debug_buffer_bytes  # only to size the buffer as the report does

    model, inputs = _build(name)
    os.makedirs(out, exist_ok=True)
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()], generate_etrecord=True)
    et = edge.to_executorch()
    pte, etrecord = os.path.join(out, "m.pte"), os.path.join(out, "m.etrecord")
    with open(pte, "wb") as f:
        f.write(et.buffer)
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(etrecord)
    buf = et.buffer
    module = _load_for_executorch_from_buffer(buf, enable_etdump=True, debug_buffer_size=debug_buffer_bytes(buf, runs))
    for _ in range(runs):
        module.forward(list(inputs))
    etdp, debug = os.path.join(out, "m.etdp"), os.path.join(out, "m.debug.bin")
    module.write_etdump_result_to_file(etdp, debug)
    insp = Inspector(etdump_path=etdp, etrecord=etrecord, debug_buffer_path=debug)
    df = insp.to_dataframe()
    print(f"plain {name}: {len(df)} rows")


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-3000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--side", choices=["plain"], help="run one side once (used by the comparison itself)")
    ap.add_argument("--model", help="corpus model for --side")
    ap.add_argument("--out", help="output directory for --side")
    ap.add_argument("--models", nargs="+", default=MODELS, help=f"corpus models (default: {' '.join(MODELS)})")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per model (default 3)")
    ap.add_argument("--etlens-src", default=str(ROOT / "src"),
                    help="the etlens source tree the report side runs (default: this checkout's src; point it at "
                         "another checkout to compare versions)")
    args = ap.parse_args()
    if args.side == "plain":
        plain(args.model, args.out or tempfile.mkdtemp(prefix="bench-plain-"))
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([args.etlens_src, os.environ.get("PYTHONPATH", "")]))
    plain_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    etlens = [sys.executable, "-m", "etlens"]
    print(f"{'model':8} {'plain s':>8} {'report s':>9} {'ratio':>6} {'lean s':>7} {'ratio':>6}   (medians of "
          f"{args.rounds} interleaved rounds; whole processes)")
    for name in args.models:
        times: dict[str, list[float]] = {"plain": [], "report": [], "lean": []}
        with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
            for r in range(args.rounds):
                times["plain"].append(_timed([sys.executable, __file__, "--side", "plain", "--model", name,
                                              "--out", os.path.join(tmp, f"plain{r}")], plain_env))
                times["report"].append(_timed([*etlens, "report", "--model", f"{CORPUS}:{name}", "-o",
                                               os.path.join(tmp, f"r{r}", "report.html")], env))
                times["lean"].append(_timed([*etlens, "report", "--model", f"{CORPUS}:{name}", "--no-trace",
                                             "--no-inside-delegates", "-o", os.path.join(tmp, f"l{r}", "report.html")],
                                            env))
                print(f"  {name} round {r + 1}: plain {times['plain'][-1]:.1f} s, report {times['report'][-1]:.1f} s, "
                      f"lean {times['lean'][-1]:.1f} s", flush=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{name:8} {med['plain']:8.1f} {med['report']:9.1f} {med['report'] / med['plain']:5.2f}x "
              f"{med['lean']:7.1f} {med['lean'] / med['plain']:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
