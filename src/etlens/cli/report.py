"""``etlens report``: the main job — one joined offline HTML report."""

from __future__ import annotations

from .._progress import console
from ._common import add_command
from .options import (EXIT_ERROR, EXIT_OK, add_backend, add_gate, add_model_source, add_prompt_len, gate_failed,
                      model_spec)


def register(sub) -> None:
    p = add_command(
        sub, "report", "one offline HTML report: passes, graph, latency, delegation, numeric gaps",
        "etlens report --demo cnn -o report.html",
        description="Build the joined report from a model (traced, lowered and run with the real ExecuTorch "
                    "toolchain) or from artifacts that came off a device.")
    src = p.add_mutually_exclusive_group(required=True)
    add_model_source(src)
    src.add_argument("--etdump", metavar="F", help="ETDump from a device run (.etdp)")
    src.add_argument("--dataset", metavar="DIR", help="a fleet dataset (`etlens collect`): the fleet dashboard")
    p.add_argument("--etrecord", metavar="F", help="ETRecord written at export (with --etdump)")
    p.add_argument("--debug-buffer", metavar="F", help="debug buffer with intermediate outputs (with --etdump)")
    p.add_argument("--pte", metavar="F", help="the program that ran (with --etdump)")
    p.add_argument("--trace", metavar="F", help="a pass trace JSON from `etlens trace` (with --etdump)")
    p.add_argument("-o", "--output", default="report.html", help="report path (default report.html)")
    p.add_argument("--method", help="with --etdump: the method of the headline and the operator table (default: "
                                    "the one that did the work, e.g. 'forward' next to an LLM's metadata methods)")
    add_prompt_len(p, "with --etdump of an LLM: the prompt length in tokens (one value for every generate session, "
                      "or one per session in order): exact token counts, TTFT and tokens/s in the LLM section of a "
                      "timing-only dump (as `etlens inspect --llm --prompt-len`)")
    p.add_argument("--title", help="page title (default: 'etlens report: ' + the model's class, demo name or file "
                                   "stem; for artifacts the .pte or .etdp stem; for a dataset its directory name)")
    add_backend(p, help="lowering target for --demo/--model")
    p.add_argument("--quantize", action="store_true", help="pt2e int8-quantize first (--demo/--model)")
    p.add_argument("--recipe", metavar="FILE",
                   help="with --quantize: a keep-in-float recipe (`etlens fix --recipe-out`): its modules stay float")
    p.add_argument("--runs", type=int, default=5, help="runtime runs for --demo/--model (default 5)")
    p.add_argument("--debug-buffer-size", type=int, metavar="BYTES",
                   help="runtime buffer for intermediate outputs (--demo/--model; default: sized from the program "
                        "for all --runs)")
    p.add_argument("--no-trace", action="store_true", help="skip the pass-by-pass trace (--demo/--model)")
    p.add_argument("--measure-memory", action="store_true",
                   help="--demo/--model: also measure the program's memory in a fresh runtime process (peak per "
                        "stage, by owner) and show it beside the plan (`etlens memory --measure`)")
    p.add_argument("--no-inside-delegates", action="store_true",
                   help="skip the per-op values inside delegates (one instrumented lower+run; --demo/--model)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when an optional stage (pass trace, inside the delegates, numeric gap) failed; "
                        "by default the report is written without it, the failure named on the page and here")
    p.add_argument("--metric", default="MSE", choices=["MSE", "L1", "SNR", "cosine", "max_abs"],
                   help="numeric-gap metric (default MSE)")
    add_gate(p, "gap", "fail when the worst gap is above X (below X for SNR/cosine)")
    add_gate(p, "latency-ms", "fail when the total latency exceeds Y ms", metavar="Y")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import EtlensError

    if args.runs < 1:
        raise EtlensError("--runs must be at least 1")
    if args.prompt_len and not args.etdump:
        raise EtlensError("--prompt-len goes with --etdump (the prompt lengths of the LLM sessions in a device's "
                          "timing-only dump), not with --demo/--model/--dataset")
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
        title = args.title or f"etlens report: {_stem(args.pte or args.etdump)}"
        result = report_from_artifacts(args.etdump, args.output, etrecord=args.etrecord,
                                       debug_buffer=args.debug_buffer, pte=args.pte, trace=trace,
                                       metric=args.metric, gap_threshold=args.fail_on_gap, title=title,
                                       method=args.method, prompt_lens=args.prompt_len)
    else:
        if args.recipe and not args.quantize:
            raise EtlensError("--recipe goes with --quantize (it keeps modules of the int8 model in float)")
        for flag in ("etrecord", "debug_buffer", "pte", "trace"):
            if getattr(args, flag):
                raise EtlensError(f"--{flag.replace('_', '-')} goes with --etdump, not with --demo/--model")
        from ..builder.session import BuildSession
        from ..report import report_from_session

        # the session starts its child (torch + the backend) while the user's model loads here
        session = BuildSession.load(model_spec(args), backend=args.backend, quantize=args.quantize,
                                    trace=not args.no_trace, verbose=args.verbose)
        if args.recipe:  # before anything quantizes: the session's quantizer leaves the recipe's modules float
            from ..builder.recipe import Recipe, check_paths, recipe_quantizer

            try:
                keep = check_paths(session.model, Recipe.load(args.recipe).keep_float,
                                   source=f"recipe {args.recipe}")
            except EtlensError:
                session.close()
                raise
            session.quantizer = recipe_quantizer(session.config, keep, exported=session.exported)
        result = report_from_session(session, args.output, title=args.title, runs=args.runs, metric=args.metric,
                                     gap_threshold=args.fail_on_gap, debug_buffer_size=args.debug_buffer_size,
                                     inside_delegates=not args.no_inside_delegates,
                                     measure_memory=args.measure_memory)
    lat = f"{result.total_latency_ms:.3f} ms" if result.total_latency_ms is not None else "n/a"
    gap = f"{result.worst_gap:.4g}" if result.worst_gap is not None else "n/a"
    share = f"{result.delegated_share:.0%}" if result.delegated_share is not None else "n/a"
    print(f"wrote {result.path}  (total latency {lat}, delegated {share} of operator time, "
          f"worst {result.gap_metric} gap "
          f"{gap}; {len(result.files)} files alongside)")
    status = EXIT_OK
    for stage, why in result.failures.items():  # optional stages: the report is complete without them
        print(f"etlens: warning: {stage} failed: {why}", file=console())
    if result.failures and getattr(args, "strict", False):
        print(f"etlens: error: --strict: {len(result.failures)} optional stage(s) failed "
              f"({', '.join(result.failures)})", file=console())
        status = EXIT_ERROR
    if args.fail_on_gap is not None and result.worst_gap is not None:
        similarity = result.gap_higher_is_better
        crossed = result.worst_gap < args.fail_on_gap if similarity else result.worst_gap > args.fail_on_gap
        if crossed:
            status = gate_failed(f"worst {result.gap_metric} gap {gap} crosses --fail-on-gap {args.fail_on_gap:g}")
    if args.fail_on_latency_ms is not None and result.total_latency_ms is not None and \
            result.total_latency_ms > args.fail_on_latency_ms:
        status = gate_failed(f"total latency {lat} exceeds --fail-on-latency-ms {args.fail_on_latency_ms:g}")
    return status


def _stem(path: str) -> str:
    """``model`` for ``out/model.pte``; ``run`` for ``run.etdp``."""
    import os

    return os.path.splitext(os.path.basename(os.path.normpath(path)))[0]


def _dashboard(args) -> int:
    """``report --dataset``: the offline fleet dashboard (numbers: etlens.fleet.dashboard; page: etlens.views)."""
    from ..fleet.dashboard import dashboard_data
    from ..views.fleet_pages import dashboard_html

    with open(args.output, "w", encoding="utf-8") as f:
        f.write(dashboard_html(dashboard_data(args.dataset), title=args.title))
    print(f"wrote {args.output}  (fleet dashboard of {args.dataset})")
    return EXIT_OK
