"""Run ``etlens report --model`` on every architecture of ``tests/corpus/extra.py``, fp32 and int8.

    python scripts/sweep_archs.py OUT_DIR [NAME ...] [--timeout S] [-o docs/sweep.md]

Each report runs as a user would run it (``python -m etlens report --model tests/corpus/extra.py:NAME
[--quantize] -o OUT_DIR/NAME-CONFIG.html``), in its own process with a time limit, one at a time.
The table says per architecture and config: the exit status, the wall time, and the report's last
line (total latency, delegated share, worst gap) or the error's first line. Not part of CI (about
a minute per build on a 2-core machine): run it when the toolchain or a flow changes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {"fp32-xnnpack": [], "int8-xnnpack": ["--quantize"]}


def _names() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tests.corpus.extra import EXTRA

    return list(EXTRA)


def run_one(out: Path, name: str, config: str, timeout: float) -> dict:
    html = out / f"{name}-{config}.html"
    cmd = [sys.executable, "-m", "etlens", "report", "--model", f"tests/corpus/extra.py:{name}",
           *CONFIGS[config], "--runs", "2", "-o", str(html)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        code, text = proc.returncode, (proc.stdout + proc.stderr).strip()
    except subprocess.TimeoutExpired:
        code, text = None, f"timed out after {timeout:.0f} s"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    ok = code in (0, 2) and html.exists() and html.stat().st_size > 0  # 2: a gap over the threshold
    return {"name": name, "config": config, "exit": code, "seconds": round(time.perf_counter() - t0, 1),
            "ok": ok, "last": (lines[-1] if lines else "")[:300]}


def table(rows: list[dict]) -> str:
    good = sum(r["ok"] for r in rows)
    out = [f"{good} of {len(rows)} reports written.", "",
           "| architecture | config | result | exit | wall (s) | last line |", "|---|---|---|---|---|---|"]
    for r in rows:
        last = r["last"].replace("|", "\\|")
        out.append(f"| {r['name']} | {r['config']} | {'report' if r['ok'] else 'FAILED'} | {r['exit']} | "
                   f"{r['seconds']} | {last} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("-o", "--output", help="write the markdown table here (else stdout)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.names or _names():
        for config in args.configs:
            rows.append(run_one(out, name, config, args.timeout))
            r = rows[-1]
            print(f"{name:<14} {config:<13} {'ok ' if r['ok'] else 'FAIL'} {r['seconds']:>6} s  {r['last'][:140]}",
                  flush=True)
    text = table(rows)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
