"""``etlens compare A B``: per op and per module, B vs A with a statistical verdict; exit 3 on a regression."""

from __future__ import annotations

import argparse

from ._common import add_command
from .options import EXIT_OK, add_output, gate_failed, render_records


def register(sub) -> None:
    p = add_command(
        sub, "compare", "A vs B per op and module (ETDumps or dataset filters): regression / improvement / same",
        "etlens compare fleet --where \"build='n'\" --where \"build='n+1'\" --html cmp.html",
        description="A and B are ETDump files (with --etrecord-a/--etrecord-b) or a dataset directory with "
                    "--where filters (one DATASET and two --where, or DATASET_A DATASET_B). Ops are matched by "
                    "debug handle, module path and name. Exit status 3 when anything regressed (a CI gate; "
                    "--no-fail-on-regression turns it off).")
    p.add_argument("sides", nargs="+", metavar="A_OR_B", help="ETDump (.etdp) or dataset directory: A then B")
    p.add_argument("--where", action="append", default=[], metavar="SQL",
                   help="filter of a dataset side (first for A, second for B), e.g. \"build='n'\"")
    p.add_argument("--etrecord-a", metavar="R")
    p.add_argument("--etrecord-b", metavar="R")
    p.add_argument("--pte-a", metavar="P", help="the program A ran: its model id (sha256) labels side A")
    p.add_argument("--pte-b", metavar="P", help="the program B ran")
    p.add_argument("--alpha", type=float, default=0.01, help="significance level (default 0.01)")
    p.add_argument("--min-effect", type=float, default=0.25, help="minimum relative p50 change (default 0.25)")
    p.add_argument("--min-delta-ms", type=float, default=0.005, help="minimum absolute p50 change (default 0.005)")
    add_output(p)
    p.add_argument("--fail-on-regression", action=argparse.BooleanOptionalAction, default=True,
                   help="exit status 3 when an op or the whole model regressed (default on)")
    p.add_argument("--html", metavar="F", help="also write an offline HTML page with distribution plots")
    p.set_defaults(func=run)


def _side(path: str, where: str | None, etrecord: str | None):
    import os

    from ..errors import MissingDataError
    from ..fleet.compare import Side

    if os.path.isdir(path):
        return Side.of_dataset(path, where)
    if not os.path.exists(path):
        raise MissingDataError(f"{path}: not found; give an ETDump (.etdp) or a dataset directory")
    return Side.of_etdumps([path], etrecord)


def run(args) -> int:
    import json

    from ..errors import EtlensError
    from ..fleet.compare import compare
    from ._common import write_text

    sides, where = args.sides, args.where
    if len(sides) == 1 and len(where) == 2:
        sides = [sides[0], sides[0]]
    if len(sides) != 2 or len(where) > 2:
        raise EtlensError("compare: give A and B (two ETDumps or datasets), or one DATASET with two --where filters")
    where = where + [None] * (2 - len(where)) if len(args.sides) == 2 else where
    a = _side(sides[0], where[0], args.etrecord_a)
    b = _side(sides[1], where[1], args.etrecord_b)
    from ..fleet.ingest import model_id

    for side, pte in ((a, args.pte_a), (b, args.pte_b)):
        if pte:
            side.label += f" (model {model_id(pte)})"
    res = compare(a, b, alpha=args.alpha, min_effect=args.min_effect, min_delta_ms=args.min_delta_ms)
    if args.html:
        from ..fleet.html import compare_html

        with open(args.html, "w", encoding="utf-8") as f:
            f.write(compare_html(res))
    out = {k: v for k, v in res.items() if k != "samples"}
    cols = ["verdict", "event_name", "module_path", "a_p50_ms", "b_p50_ms", "ratio"]
    if args.format == "json":  # {rows, modules, summary}
        text = json.dumps(out, indent=1, default=float)
    elif args.format in ("csv", "tsv"):  # every op row, every field
        text = render_records(res["rows"], args.format)
    else:
        from tabulate import tabulate

        shown = [r for r in res["rows"] if r["verdict"] != "same"] or res["rows"][:10]
        s = res["summary"]
        text = tabulate([[r.get(c) for c in cols] for r in shown], headers=cols, floatfmt=".4g") + \
            f"\n{s['regressions']} regression(s), {s['improvements']} improvement(s) over {s['ops']} ops; " \
            f"whole-model p50 {s['model_latency']['a_p50_ms']} -> {s['model_latency']['b_p50_ms']} ms " \
            f"({s['model_latency']['verdict']})"
    write_text(text, args.output)
    regressed = res["summary"]["regressions"] or res["summary"]["model_latency"]["verdict"] == "regression"
    if regressed and args.fail_on_regression:
        return gate_failed("regression(s) between A and B")
    return EXIT_OK
