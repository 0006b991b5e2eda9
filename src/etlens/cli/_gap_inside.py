"""``etlens gap --model … --inside-delegates``: the per-op gap inside delegates, from a model.

Kept apart from :mod:`etlens.cli.gap` (the artifact mode) so each stays small. The model is
lowered and run by :func:`etlens.builder.inside.inside_delegates`; the exit status is 3 (a failed
gate) when a value crosses ``--fail-on-gap``, as in the artifact mode.
"""

from __future__ import annotations

from .emit import emit
from .options import EXIT_OK, add_backend, add_model_source, gate_failed, model_spec

__all__ = ["add_inside_arguments", "run_inside"]


def add_inside_arguments(p) -> None:
    """The model-mode flags of ``etlens gap``."""
    g = p.add_argument_group("inside delegates (lower and run a model instead of reading artifacts)")
    src = g.add_mutually_exclusive_group()
    add_model_source(src)
    g.add_argument("--inside-delegates", action="store_true",
                   help="one row per op inside each delegate, computed by the backend's kernels (implied by --model)")
    g.add_argument("--quantize", action="store_true", help="pt2e int8-quantize with the backend's quantizer first")
    add_backend(g, help="partitioner to lower with")
    g.add_argument("--bisect", action="store_true",
                   help="confirm the first crossing with O(log N) single-value builds (needs --fail-on-gap)")
    g.add_argument("--no-introduced", dest="introduced", action="store_false",
                   help="with --quantize: skip the introduced-error column (each quantized op's own error, re-run "
                        "on the float model's inputs, measured at the model output; computed in PyTorch)")


def run_inside(args) -> int:
    """Lower + run ``--model``/``--demo`` instrumented, print or write the rows; exit 3 on a crossing."""
    from ..builder.inside import inside_delegates
    from ..builder.session import BuildSession
    from ..errors import EtlensError

    for flag in ("etdump", "etrecord", "debug_buffer", "inputs", "run"):
        if getattr(args, flag):
            raise EtlensError(f"--{flag.replace('_', '-')} reads device artifacts; it does not go with "
                              "--model/--demo/--inside-delegates")
    spec = model_spec(args)
    if not spec:
        raise EtlensError("--inside-delegates needs --model FILE.py:FN or --demo NAME")
    # the session's child imports torch + the backend while the model loads; the builds run there
    with BuildSession.load(spec, backend=args.backend, quantize=args.quantize,
                           verbose=getattr(args, "verbose", False)) as session:
        if not getattr(session.config, "runs", True):  # e.g. Ethos-U: the delegated TOSA graph, not a run
            return _estimated_inside(args, session)
        res = inside_delegates(session.model, session.inputs, backend=args.backend, quantize=args.quantize,
                               metric=args.metric, threshold=args.threshold, bisect=args.bisect, session=session)
        intro = _introduced(args, session, res)
    emit(args, doc=lambda: {**res.to_dict(), "introduced": intro}, rows=lambda: res.to_dict()["rows"],
         text=lambda: res.to_text() + _introduced_text(intro))
    if res.crossing:
        return gate_failed(f"a value inside a delegate crosses --fail-on-gap {args.threshold:g} ({args.metric})")
    return EXIT_OK


#: more quantized clusters than this and the introduced column is left out (each one re-runs the float model)
MAX_INTRODUCED_CLUSTERS = 400


def _introduced(args, session, res) -> dict:
    """Add the introduced error to ``res.rows`` (``introduced``, ``introduced_snr_db``, ``introduced_rank``,
    ``accumulated_nsr``); return the document's ``introduced`` block: whether it is there and why not."""
    if not args.quantize:
        return {"available": False, "why": "a float build: no op is quantized (give --quantize)"}
    if not getattr(args, "introduced", True):
        return {"available": False, "why": "skipped (--no-introduced)"}
    from ..analysis.numerics.introduced import attach_introduced, cluster_count, introduced_errors

    try:
        quant = session.quantized_module
        n = cluster_count(quant)
        if n > MAX_INTRODUCED_CLUSTERS:
            return {"available": False, "why": f"{n} op clusters (> {MAX_INTRODUCED_CLUSTERS}): each re-runs the "
                                               "float model; use etlens fix or introduced_errors() directly"}
        clusters = introduced_errors(session.float_module(), quant, session.inputs)
    except Exception as exc:  # noqa: BLE001 - an extra column: say why it is missing, keep the gap rows
        text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return {"available": False, "why": f"{type(exc).__name__}: {text}".rstrip(": ")}
    matched = attach_introduced(res.rows, clusters)
    top = clusters[0] if clusters else None
    return {"available": True, "why": None, "clusters": len(clusters), "rows_matched": matched,
            "top": None if top is None else {"module_path": top.module_path, "op": top.op, "nodes": top.nodes,
                                             "introduced": top.introduced, "accumulated": top.accumulated},
            "measure": "noise-to-signal ratio at the model outputs with only this op's own quantization error"}


def _introduced_text(intro: dict) -> str:
    """The introduced-vs-accumulated lines under the gap table."""
    if not intro.get("available"):
        return f"\nintroduced error: not computed ({intro.get('why')})"
    top = intro.get("top")
    if not top:
        return "\nintroduced error: no quantized op"
    return (f"\nintroduced error (each quantized op alone, at the model output): worst {top['module_path'] or '?'} "
            f"({', '.join(top['nodes'])}) {top['introduced']:.3g} NSR, accumulated at it {top['accumulated']:.3g}; "
            "rows carry introduced / introduced_rank (etlens fix proposes what to keep in float)")


def _estimated_inside(args, session) -> int:
    """Values inside the delegates of a build that does not run here: its backend's ``numerics`` hook
    (Ethos-U: each partition's TOSA graph in the reference model vs the pt2e and float references); exit 3
    when a row is flagged."""
    from ..backends import for_build, hook
    from ..errors import EtlensError

    numerics = hook(for_build(session.config.name), "numerics")
    if numerics is None:
        raise EtlensError(f"--inside-delegates: backend {args.backend!r} builds programs that do not run here and "
                          "etlens has no way to look inside its delegates yet")
    res = numerics.inside_values(session, metric=args.metric, threshold=args.threshold)
    emit(args, doc=res.to_dict, rows=lambda: [r.to_json() for r in res.rows], text=res.to_text)
    first = res.first_flagged
    if first is not None and args.threshold is not None:
        return gate_failed(numerics.gate_message(first))
    return EXIT_OK
