"""Write docs/corpus.md from the corpus test run's results (the ``row.json`` of every built case).

    python -m pytest -m corpus tests/corpus -n 2 --dist loadgroup
    python scripts/corpus_table.py                 # reads $ETLENS_FIXTURE_CACHE/corpus-<hash>/
    python scripts/corpus_table.py DIR -o docs/corpus.md

Columns: build time (report_from_model: trace, lower, run, report), nodes of the edge program,
events in the Inspector DataFrame, rows of the numeric-gap table, and pass/fail of every check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ["report", "info+view", "inspector", "numeric gap", "delegation"]
CONFIGS = ["fp32-xnnpack", "int8-xnnpack", "fp32-portable"]


def _latest_dir() -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.corpus.conftest import corpus_dir

    return corpus_dir()


def table(rows: list[dict]) -> str:
    from tests.corpus.models import CORPUS

    head = "| architecture | family | config | build (s) | nodes | events | gap rows | " + \
        " | ".join(CHECKS) + " |"
    out = [head, "|" + "---|" * (7 + len(CHECKS))]
    order = {n: i for i, n in enumerate(CORPUS)}
    for r in sorted(rows, key=lambda r: (order.get(r["arch"], 99), CONFIGS.index(r["config"])
                                         if r["config"] in CONFIGS else 9)):
        checks = r.get("checks", {})
        gap = r.get("gap_rows", "")
        if r.get("gap_note"):
            gap = f"0 ({r['gap_note'][:80]})"
        elif r.get("et_gap_error"):
            gap = f"{gap} (ExecuTorch raises)"
        cells = [r["arch"], CORPUS[r["arch"]].family if r["arch"] in CORPUS else "", r["config"],
                 f"{r['build_s']:.0f}" if isinstance(r.get("build_s"), (int, float)) else "",
                 str(r.get("nodes", "")), str(r.get("events", "")), str(gap)]
        cells += [checks.get(c, "—") for c in CHECKS]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", help="the corpus cache directory (default: the current source's)")
    ap.add_argument("-o", "--output", default=str(ROOT / "docs" / "corpus.md"))
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    d = Path(args.dir) if args.dir else _latest_dir()
    rows = [json.loads(p.read_text()) for p in sorted(d.glob("*/row.json"))]
    if not rows:
        print(f"no results under {d}: run the corpus tests first", file=sys.stderr)
        return 1
    passed = sum(all(v == "pass" for v in r.get("checks", {}).values()) and len(r.get("checks", {})) == len(CHECKS)
                 for r in rows)
    from tests.corpus.test_corpus import CASES

    done = {f"{r['arch']}:{r['config']}" for r in rows}
    missing = [c for c in CASES if c not in done]
    text = HEADER + f"\n{passed} of {len(rows)} cases pass every check.\n\n" + table(rows) + "\n"
    if missing:
        text += (f"\nNot in this run ({len(missing)} of the {len(CASES)} cases of `tests/corpus/test_corpus.py`): "
                 + ", ".join(f"`{c}`" for c in missing) + ".\n")
    text += FOOTER
    Path(args.output).write_text(text)
    print(f"wrote {args.output} ({len(rows)} cases, {passed} pass every check)")
    return 0


HEADER = """# The real-architecture corpus

`tests/corpus/models.py` builds real architectures from `transformers` configs (small dimensions,
random weights, no download). The corpus tests (`pytest -m corpus tests/corpus`, part of
`scripts/test.sh`) build each architecture × config once per source version through
`etlens.report.report_from_model` (what `etlens report --model tests/corpus/models.py:NAME` runs)
and check every path against ExecuTorch on the files it wrote:

* **report**: the report and every artifact were written;
* **info+view**: `etlens info` on the `.pte`, `.etrecord`, `.etdp` and pass trace, `etlens view` on
  the `.pte`, `.etrecord` and trace;
* **inspector**: `etlens.Inspector(...).to_dataframe()` equals `executorch.devtools.Inspector`'s;
* **numeric gap**: `calculate_numeric_gap("MSE")` equals ExecuTorch's where ExecuTorch succeeds;
  where ExecuTorch raises, etlens gives rows or an `EtlensError` with the reason;
* **delegation**: `get_delegation_info(etrecord)` equals ExecuTorch's `get_delegation_info` on the
  lowered program in memory (taken right after `to_edge_transform_and_lower`).

Build time is the wall time of `report_from_model` (trace, export, quantize, lower, 2 runs, report)
measured during the test run, which shares the machine's 2 cores with the other builds (the checked-in
table was measured on a 2-core machine shared with five other sessions, load average ~4: a quiet machine
builds gpt2 fp32 XNNPACK with ~32 s of CPU); nodes are
the edge program's nodes, events the Inspector DataFrame's rows.

Regenerate: `python -m pytest -m corpus tests/corpus -n 2 --dist loadgroup && python scripts/corpus_table.py`.
"""

FOOTER = """
A failing check names the case in the test id (`tests/corpus/test_corpus.py::test_…[gpt2-int8-xnnpack]`);
the build's own error and traceback are in `result.json` next to its artifacts.
"""

if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT / "src"))
    raise SystemExit(main())
