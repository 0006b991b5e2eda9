"""``etlens compare A B``: per op and per module, B vs A with a statistical verdict; exit 3 on a regression."""

from __future__ import annotations

import argparse

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_output, gate_failed


def register(sub) -> None:
    p = add_command(
        sub, "compare", "A vs B per op and module (ETDumps or dataset filters): regression / improvement / same",
        "etlens compare fleet --where \"build='n'\" --where \"build='n+1'\" --html cmp.html",
        description="A and B are ETDump files (with --etrecord-a/--etrecord-b), directories of ETDumps, or a "
                    "dataset directory with --where filters (one DATASET and two --where, or DATASET_A DATASET_B); "
                    "--a/--b take several ETDumps a side. Ops are matched by debug handle, module path and name. "
                    "Each ETDump is one process, the unit of replication: its runs are reduced to their median and "
                    "the processes of A and B are compared (a moderated t test), and a change counts only beyond "
                    "max(--min-effect, --noise-k x the op's own process-to-process spread). Give several processes "
                    "a side (3+); with one a side the runs are tested and the floor comes from the spread of all "
                    "ops. Exit status 3 when anything regressed (a CI gate; --no-fail-on-regression turns it off).")
    p.add_argument("sides", nargs="*", metavar="A_OR_B",
                   help="ETDump (.etdp), directory of ETDumps, or dataset directory: A then B")
    p.add_argument("--a", nargs="+", metavar="ETDP", dest="a_files", help="side A as several ETDumps (processes)")
    p.add_argument("--b", nargs="+", metavar="ETDP", dest="b_files", help="side B as several ETDumps (processes)")
    p.add_argument("--where", action="append", default=[], metavar="SQL",
                   help="filter of a dataset side (first for A, second for B), e.g. \"build='n'\"")
    p.add_argument("--etrecord-a", metavar="R")
    p.add_argument("--etrecord-b", metavar="R")
    p.add_argument("--pte-a", metavar="P", help="the program A ran: its model id (sha256) labels side A")
    p.add_argument("--pte-b", metavar="P", help="the program B ran")
    from ..fleet.stats import DEFAULTS

    p.add_argument("--alpha", type=float, default=DEFAULTS["alpha"],
                   help=f"significance level (default {DEFAULTS['alpha']})")
    p.add_argument("--fdr", type=float, default=DEFAULTS["fdr"],
                   help="false discovery rate over all ops of the comparison (Benjamini-Hochberg; default "
                        f"{DEFAULTS['fdr']})")
    p.add_argument("--min-effect", type=float, default=DEFAULTS["min_effect"],
                   help=f"smallest relative change that can count (default {DEFAULTS['min_effect']})")
    p.add_argument("--noise-k", type=float, default=DEFAULTS["noise_k"],
                   help="a change must also exceed this many of the op's process-to-process standard deviations "
                        f"(default {DEFAULTS['noise_k']})")
    p.add_argument("--min-delta-ms", type=float, default=DEFAULTS["min_delta_ms"],
                   help=f"minimum absolute p50 change (default {DEFAULTS['min_delta_ms']})")
    p.add_argument("--unit", choices=["file", "device"], default="file",
                   help="what one replicate is: an ETDump file = one process (default) or a device")
    add_output(p)
    p.add_argument("--fail-on-regression", action=argparse.BooleanOptionalAction, default=True,
                   help="exit status 3 when an op or the whole model regressed (default on)")
    p.add_argument("--html", metavar="F", help="also write an offline HTML page with distribution plots")
    p.set_defaults(func=run)


def _side(path: str, where: str | None, etrecord: str | None):
    import glob
    import os

    from ..errors import MissingDataError
    from ..fleet.compare import Side

    if os.path.isdir(path):
        dumps = sorted(glob.glob(os.path.join(glob.escape(path), "*.etdp")))
        if dumps and not glob.glob(os.path.join(glob.escape(path), "**", "*.parquet"), recursive=True):
            return Side.of_etdumps(dumps, etrecord)   # a directory of ETDumps: one process each
        return Side.of_dataset(path, where)
    if not os.path.exists(path):
        raise MissingDataError(f"{path}: not found; give an ETDump (.etdp) or a dataset directory")
    return Side.of_etdumps([path], etrecord)


def _files_side(paths: list[str], etrecord: str | None):
    import os

    from ..errors import MissingDataError
    from ..fleet.compare import Side

    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise MissingDataError(f"{missing[0]}: not found; --a/--b take ETDump files (.etdp)")
    return Side.of_etdumps(paths, etrecord)


def run(args) -> int:
    from ..errors import EtlensError

    if args.a_files or args.b_files:
        if not (args.a_files and args.b_files) or args.sides:
            raise EtlensError("compare: give both --a and --b (several ETDumps a side), without positional sides")
        return _report(args, _files_side(args.a_files, args.etrecord_a), _files_side(args.b_files, args.etrecord_b))
    sides, where = args.sides, args.where
    if len(sides) == 1 and len(where) == 2:
        sides = [sides[0], sides[0]]
    if len(sides) != 2 or len(where) > 2:
        raise EtlensError("compare: give A and B (two ETDumps or datasets), or one DATASET with two --where filters")
    where = where + [None] * (2 - len(where)) if len(args.sides) == 2 else where
    return _report(args, _side(sides[0], where[0], args.etrecord_a), _side(sides[1], where[1], args.etrecord_b))


def _report(args, a, b) -> int:
    from ..fleet.compare import compare
    from ..fleet.ingest import model_id

    for side, pte in ((a, args.pte_a), (b, args.pte_b)):
        if pte:
            side.label += f" (model {model_id(pte)})"
    res = compare(a, b, alpha=args.alpha, min_effect=args.min_effect, min_delta_ms=args.min_delta_ms,
                  noise_k=args.noise_k, unit=args.unit, fdr=args.fdr)
    if args.html:
        from ..views.fleet_pages import compare_html

        with open(args.html, "w", encoding="utf-8") as f:
            f.write(compare_html(res))
    out = {k: v for k, v in res.items() if k != "samples"}
    cols = ["verdict", "event_name", "module_path", "a_p50_ms", "b_p50_ms", "ratio", "floor", "p_value"]
    if res["summary"]["prior_spread"] is not None:   # processes as the unit: the ratio the verdict judged, too
        cols.insert(6, "unit_ratio")

    def text() -> str:
        from tabulate import tabulate

        shown = [r for r in res["rows"] if r["verdict"] != "same"] or res["rows"][:10]
        s = res["summary"]
        return tabulate([[r.get(c) for c in cols] for r in shown], headers=cols, floatfmt=".4g") + \
            f"\n{s['regressions']} regression(s), {s['improvements']} improvement(s) over {s['ops']} ops; " \
            f"whole-model p50 {s['model_latency']['a_p50_ms']} -> {s['model_latency']['b_p50_ms']} ms " \
            f"({s['model_latency']['verdict']})\n" + _unit_line(s)

    # JSON: {rows, modules, summary}; CSV/TSV: every op row, every field
    emit(args, doc=out, rows=res["rows"], text=text)
    regressed = res["summary"]["regressions"] or res["summary"]["model_latency"]["verdict"] == "regression"
    if regressed and args.fail_on_regression:
        return gate_failed("regression(s) between A and B")
    return EXIT_OK


def _unit_line(s: dict) -> str:
    """How the verdicts were reached, and the unchanged-but-noisy ops (their floor is their own spread)."""
    if s["prior_spread"] is not None:
        line = (f"unit: one {s['unit']} (runs inside it are repeated measures); processes' speed scatter "
                f"{100 * s.get('speed_spread', 0.0):.1f} % taken off each op by its own sensitivity (sides' shared "
                f"shift x{s.get('state_shift', 1.0):.3f} by state, x{s.get('program_shift', 1.0):.3f} common); "
                f"typical op spread left {100 * s['prior_spread']:.1f} %; spread of all ops' ratios sets a floor "
                f"of x{s['cross_op_floor']:.3f}")
    else:
        line = (f"unit: {s['unit']}; effect floor from the spread of all ops x{s['cross_op_floor']:.3f} "
                "(give several ETDumps a side for a process-level test)")
    if s["noisy"]:
        noisy = ", ".join(f"{n['event_name']}@{n['module_path'] or '-'} (floor x{n['floor']:.2f})"
                          for n in s["noisy"][:8])
        line += f"\nunchanged but noisy ({len(s['noisy'])}): {noisy}" + (" …" if len(s["noisy"]) > 8 else "")
    return line
