"""``etlens report``: the main job — one joined offline HTML report."""

from __future__ import annotations

from .._progress import console
from ._common import add_command


def register(sub) -> None:
    p = add_command(
        sub, "report", "one offline HTML report: passes, graph, latency, delegation, numeric gaps",
        "etlens report --demo cnn -o report.html",
        description="Build the joined report from a model (traced, lowered and run with the real ExecuTorch "
                    "toolchain) or from artifacts that came off a device.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--demo", nargs="?", const="cnn", metavar="NAME",
                     help="a built-in demo model (default cnn; see `etlens demos`)")
    src.add_argument("--model", metavar="FILE.py:FUNC",
                     help="a function returning (module, example_inputs), as path.py:func or package.module:func")
    src.add_argument("--etdump", metavar="F", help="ETDump from a device run (.etdp)")
    src.add_argument("--dataset", metavar="DIR", help="a fleet dataset (`etlens collect`): the fleet dashboard")
    p.add_argument("--etrecord", metavar="F", help="ETRecord written at export (with --etdump)")
    p.add_argument("--debug-buffer", metavar="F", help="debug buffer with intermediate outputs (with --etdump)")
    p.add_argument("--pte", metavar="F", help="the program that ran (with --etdump)")
    p.add_argument("--trace", metavar="F", help="a pass trace JSON from `etlens trace` (with --etdump)")
    p.add_argument("-o", "--output", default="report.html", help="report path (default report.html)")
    p.add_argument("--backend", default="xnnpack", choices=["xnnpack", "portable"],
                   help="lowering target for --demo/--model (default xnnpack)")
    p.add_argument("--quantize", action="store_true", help="pt2e int8-quantize first (--demo/--model)")
    p.add_argument("--runs", type=int, default=5, help="runtime runs for --demo/--model (default 5)")
    p.add_argument("--debug-buffer-size", type=int, metavar="BYTES",
                   help="runtime buffer for intermediate outputs (--demo/--model; default: sized from the program "
                        "for all --runs)")
    p.add_argument("--no-trace", action="store_true", help="skip the pass-by-pass trace (--demo/--model)")
    p.add_argument("--no-inside-delegates", action="store_true",
                   help="skip the per-op values inside delegates (one instrumented lower+run; --demo/--model)")
    p.add_argument("--metric", default="MSE", choices=["MSE", "L1", "SNR", "cosine", "max_abs"],
                   help="numeric-gap metric (default MSE)")
    p.add_argument("--fail-on-gap", type=float, metavar="X",
                   help="exit 2 when the worst gap is above X (below X for SNR/cosine)")
    p.add_argument("--fail-on-latency-ms", type=float, metavar="Y", help="exit 2 when total latency exceeds Y ms")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import EtlensError

    if args.runs < 1:
        raise EtlensError("--runs must be at least 1")
    if args.dataset:
        return _dashboard(args)
    if args.debug_buffer_size is not None and args.debug_buffer_size < 1:
        raise EtlensError("--debug-buffer-size must be a positive number of bytes")
    if args.etdump:
        if args.debug_buffer_size is not None:
            raise EtlensError("--debug-buffer-size goes with --demo/--model (it sizes the runtime's buffer)")
        from ..readers import read
        from ..report import report_from_artifacts

        trace = read(args.trace) if args.trace else None
        result = report_from_artifacts(args.etdump, args.output, etrecord=args.etrecord,
                                       debug_buffer=args.debug_buffer, pte=args.pte, trace=trace,
                                       metric=args.metric, gap_threshold=args.fail_on_gap)
    else:
        for flag in ("etrecord", "debug_buffer", "pte", "trace"):
            if getattr(args, flag):
                raise EtlensError(f"--{flag.replace('_', '-')} goes with --etdump, not with --demo/--model")
        from ..passes.loader import load_model
        from ..report import report_from_model

        name = args.demo or args.model
        model, inputs, stem = load_model(name)
        result = report_from_model(model, inputs, args.output, name=stem, backend=args.backend,
                                   quantize=args.quantize, runs=args.runs, trace=not args.no_trace,
                                   metric=args.metric, gap_threshold=args.fail_on_gap,
                                   debug_buffer_size=args.debug_buffer_size, verbose=args.verbose,
                                   inside_delegates=not args.no_inside_delegates)
    lat = f"{result.total_latency_ms:.3f} ms" if result.total_latency_ms is not None else "n/a"
    gap = f"{result.worst_gap:.4g}" if result.worst_gap is not None else "n/a"
    share = f"{result.delegated_share:.0%}" if result.delegated_share is not None else "n/a"
    print(f"wrote {result.path}  (total latency {lat}, delegated {share} of operator time, "
          f"worst {result.gap_metric} gap "
          f"{gap}; {len(result.files)} files alongside)")
    status = 0
    if args.fail_on_gap is not None and result.worst_gap is not None:
        similarity = result.gap_higher_is_better
        crossed = result.worst_gap < args.fail_on_gap if similarity else result.worst_gap > args.fail_on_gap
        if crossed:
            print(f"etlens: gate failed: worst {result.gap_metric} gap {gap} crosses --fail-on-gap "
                  f"{args.fail_on_gap:g}", file=console())
            status = 2
    if args.fail_on_latency_ms is not None and result.total_latency_ms is not None and \
            result.total_latency_ms > args.fail_on_latency_ms:
        print(f"etlens: gate failed: total latency {lat} exceeds --fail-on-latency-ms {args.fail_on_latency_ms:g}",
              file=console())
        status = 2
    return status


def _dashboard(args) -> int:
    """``report --dataset``: the offline fleet dashboard (etlens.fleet.html)."""
    from ..fleet.html import dashboard_html

    with open(args.output, "w", encoding="utf-8") as f:
        f.write(dashboard_html(args.dataset))
    print(f"wrote {args.output}  (fleet dashboard of {args.dataset})")
    return 0
