"""``etlens collect ETDUMP_OR_DIR... -o DATASET``: every profiling event of every run into a Parquet dataset."""

from __future__ import annotations

import sys

from ._common import add_command
from .options import EXIT_OK


def register(sub) -> None:
    p = add_command(
        sub, "collect", "append ETDumps (files or directories) to a Parquet fleet dataset",
        "etlens collect dumps/pixel7/ -o fleet --meta device=pixel7 --meta build=n --etrecord model.etrecord",
        description="Append every profiling event of every run of the ETDumps to DATASET (a directory of "
                    "Parquet files; new files each time, nothing rewritten). Bad files are skipped with a reason. "
                    "Query it with `etlens query`, compare builds with `etlens compare`. No torch needed.")
    p.add_argument("inputs", nargs="+", metavar="ETDUMP_OR_DIR", help=".etdp files, or directories to search")
    p.add_argument("-o", "--output", required=True, metavar="DATASET", help="dataset directory (created or appended)")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="a constant column for these runs: device=…, build=…, model=… or any key (repeatable)")
    p.add_argument("--etrecord", metavar="R", help="ETRecord: attribute events to debug handles, nodes, module paths")
    p.add_argument("--pte", metavar="P", help="the program that ran: the model column is its sha256 (first 16 hex)")
    p.add_argument("-j", "--jobs", type=int, help="worker processes (default: all cores)")
    p.add_argument("--engine", choices=["local", "spark"], default="local",
                   help="local processes (default) or Spark (binaryFiles -> parser per partition -> Parquet)")
    p.set_defaults(func=run)


def parse_meta(items: list[str]) -> dict[str, str]:
    from ..errors import EtlensError

    meta = {}
    for kv in items:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise EtlensError(f"--meta {kv!r}: expected KEY=VALUE (e.g. --meta device=pixel7)")
        meta[key] = value
    return meta


def run(args) -> int:
    meta = parse_meta(args.meta)

    def skip(path: str, reason: str) -> None:
        print(f"skipped {path}: {reason}", file=sys.stderr)

    if args.engine == "spark":
        from ..fleet.spark import spark_collect

        res = spark_collect(args.inputs, args.output, meta=meta, etrecord=args.etrecord, pte=args.pte)
        for path, reason in res.skipped:
            skip(path, reason)
    else:
        from ..fleet import collect

        res = collect(args.inputs, args.output, meta=meta, etrecord=args.etrecord, pte=args.pte, jobs=args.jobs,
                      on_skip=skip)
    note = f"; {len(res.skipped)} skipped (reasons above)" if res.skipped else ""
    print(f"collected {res.events} events from {res.files} files into {res.dataset} "
          f"in {res.seconds:.2f} s{note}")
    return EXIT_OK
