"""``etlens collect ETDUMP_OR_DIR... -o DATASET``: every profiling event of every run into a Parquet dataset."""

from __future__ import annotations

import sys

from ._common import add_command
from .options import EXIT_OK, add_prompt_len


def register(sub) -> None:
    p = add_command(
        sub, "collect", "add ETDumps (files or directories) to a Parquet fleet dataset, each run once",
        "etlens collect dumps/pixel7/ -o fleet --meta device=pixel7 --meta build=n --etrecord model.etrecord",
        description="Add every profiling event of every run of the ETDumps to DATASET (a directory of "
                    "Parquet files; new files each time). Each ETDump's identity (sha256 of its bytes, with "
                    "the --meta values) is kept with its rows: a dump the dataset already holds is not added "
                    "again, so re-running a collect (a retried CI job, an interrupted run) never double-counts; "
                    "the last line says how many runs were new and how many already present. A killed collect "
                    "leaves a valid dataset; concurrent collects into one dataset are safe. Bad files are "
                    "skipped with a reason. Query it with `etlens query`, compare builds with `etlens compare`. "
                    "No torch needed.")
    p.add_argument("inputs", nargs="+", metavar="ETDUMP_OR_DIR", help=".etdp files, or directories to search")
    p.add_argument("-o", "--output", required=True, metavar="DATASET", help="dataset directory (created or appended)")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="a constant column for these runs: device=…, build=…, model=… or any key (repeatable)")
    p.add_argument("--etrecord", metavar="R", help="ETRecord: attribute events to debug handles, nodes, module paths")
    p.add_argument("--pte", metavar="P", help="the program that ran: the model column is its sha256 (first 16 hex)")
    p.add_argument("-j", "--jobs", type=int, help="worker processes (default: all cores)")
    p.add_argument("--engine", choices=["local", "spark"], default="local",
                   help="local processes (default) or Spark (binaryFiles -> parser per partition -> Parquet)")
    add_prompt_len(p, "an LLM's prompt length in tokens (one value for every generate session of every dump, or "
                      "one per session in order) for the phase column of timing-only dumps: a static-shape "
                      "program's prompt runs are then prefill, not decode (as `etlens inspect --llm --prompt-len`)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--replace", action="store_true",
                     help="swap the rows of dumps the dataset already holds (same content, any --meta) for these")
    how.add_argument("--append-duplicates", action="store_true",
                     help="add every dump even if the dataset holds it already (the behaviour before identities)")
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

    mode = "replace" if args.replace else "append" if args.append_duplicates else "skip"
    if args.engine == "spark":
        from ..fleet.spark import spark_collect

        res = spark_collect(args.inputs, args.output, meta=meta, etrecord=args.etrecord, pte=args.pte, mode=mode,
                            prompt_lens=args.prompt_len)
        for path, reason in res.skipped:
            skip(path, reason)
    else:
        from ..fleet import collect

        res = collect(args.inputs, args.output, meta=meta, etrecord=args.etrecord, pte=args.pte, jobs=args.jobs,
                      on_skip=skip, mode=mode, prompt_lens=args.prompt_len)
    print(res.message())
    return EXIT_OK
