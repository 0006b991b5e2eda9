"""``etlens fix --model FILE.py:build --quantize``: which modules to keep in float, verified by re-lowering.

Ranks the quantized ops by the error each one introduces on its own (not the error it inherits),
simulates keep-in-float sets in PyTorch (each culprit set alone and with the consumers that would
quantize its output again), lowers and runs the few worth verifying (at most ``--max-lowerings``),
and writes the chosen recipe (``--recipe-out``): every module it keeps in float, what stays float and
why, and the toolchain quantizer's calls that apply it. ``etlens report --model … --quantize --recipe
FILE`` applies it too. Every file goes through :mod:`etlens.cli.emit` (one JSON style).
"""

from __future__ import annotations

from ._common import add_command
from .emit import emit, wants_data
from .options import EXIT_OK, add_backend, add_model_source, gate_failed, model_spec

__all__ = ["register", "run"]

_COLUMNS = ["keep_float", "snr_db", "mse", "latency_ms", "pte_bytes", "arena_bytes", "pareto", "chosen"]


def register(sub) -> None:
    from .options import add_output

    p = add_command(sub, "fix", "keep-in-float recipe: culprit ops by introduced error, candidates re-lowered",
                    "etlens fix --model model.py:build --quantize --target-snr 30 --format json -o fix.json "
                    "--recipe-out recipe.json",
                    description="Rank the quantized ops of an int8 model by the error each introduces on its own "
                                "(re-run on the float model's inputs), then propose modules to keep in float, "
                                "re-lower and run the candidates (SNR vs float, ETDump latency, .pte and arena "
                                "bytes) and write the chosen recipe.")
    src = p.add_mutually_exclusive_group(required=True)
    add_model_source(src)
    add_backend(p, help="lowering target")
    p.add_argument("--quantize", action="store_true", help="pt2e int8-quantize (required: fix keeps parts of the int8 "
                                                           "model in float)")
    p.add_argument("--target-snr", type=float, metavar="DB",
                   help="output SNR vs float to reach (dB): the smallest keep-float set that reaches it; default: "
                        "the smallest set removing 95%% of what the budget can")
    p.add_argument("--max-float", type=int, metavar="N",
                   help="most modules kept in float (default: 2 or 5%% of the quantized modules, whichever is more)")
    p.add_argument("--max-lowerings", type=int, default=5, metavar="N",
                   help="most lowerings, the int8 build included (default 5)")
    p.add_argument("--runs", type=int, default=3, help="runtime runs per lowered candidate (default 3)")
    p.add_argument("--recipe-out", metavar="FILE", help="write the chosen recipe (JSON) here")
    p.add_argument("--overlay-out", metavar="FILE",
                   help="write the introduced error per node as JSON {node: NSR}: an overlay for `etlens "
                        "model-explorer MODEL.etrecord --node-data introduced=FILE` (node names of the quantized "
                        "graph, as in the ETRecord of `etlens report --quantize`)")
    p.add_argument("--work-dir", metavar="DIR", help="keep the candidates' .pte / .etdp here (default: a temporary "
                                                     "directory)")
    p.add_argument("--fail-below-snr", type=float, metavar="DB",
                   help="exit 3 when the chosen recipe's measured output SNR is below DB")
    add_output(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import tempfile

    from .._progress import console
    from ..errors import EtlensError

    if not args.quantize:
        raise EtlensError("etlens fix needs --quantize: it keeps modules of the int8 model in float")
    if args.runs < 1:
        raise EtlensError("--runs must be at least 1")
    if args.max_float is not None and args.max_float < 1:
        raise EtlensError("--max-float must be at least 1")
    from ..analysis.fix import fix_model
    from ..builder.session import BuildSession

    quiet = wants_data(args) and not args.output

    def progress(msg: str) -> None:
        if not quiet or args.verbose:
            print(f"etlens fix: {msg}", file=console())

    with BuildSession.load(model_spec(args), backend=args.backend, quantize=True, verbose=args.verbose) as session:
        with tempfile.TemporaryDirectory(prefix="etlens-fix-") as tmp:
            res = fix_model(session, args.work_dir or tmp, target_snr=args.target_snr, max_float=args.max_float,
                            max_lowerings=args.max_lowerings, runs=args.runs, on_progress=progress)
    if args.recipe_out:
        _write_json(args.recipe_out, res.recipe.to_json())
    if args.overlay_out:
        _write_json(args.overlay_out, _overlay(res.culprits))
    doc = res.to_json()
    rows = [{**c.to_json(), "keep_float": _keep(c) or "(none: all int8)"} for c in res.candidates]
    emit(args, doc=doc, rows=rows, columns=_COLUMNS, text=lambda: _text(res))
    for note in res.notes:
        print(f"etlens fix: note: {note}", file=console())
    chosen = next((c for c in res.candidates if c.chosen), None)
    measured = chosen.snr_db if chosen is not None and chosen.snr_db is not None else float("-inf")
    if args.fail_below_snr is not None and chosen is not None and measured < args.fail_below_snr:
        return gate_failed(f"the chosen recipe's output SNR {chosen.snr_db} dB is below --fail-below-snr "
                           f"{args.fail_below_snr:g}")
    return EXIT_OK


def _keep(c) -> str:
    """A candidate's modules, with its op type when it is an "every module of this type" set."""
    return (f"every {c.op_type}: " if getattr(c, "op_type", None) else "") + " ".join(c.keep_float)


def _overlay(culprits) -> dict:
    """``{node: introduced}`` for every node of every quantized cluster (Model Explorer node data)."""
    import math

    return {n: c.introduced for c in culprits for n in c.nodes if math.isfinite(c.introduced)}


def _write_json(path: str, doc) -> None:
    """``doc`` to ``path`` in the command line's one JSON style (:func:`etlens.cli.emit.render`)."""
    import os

    from ._common import write_text
    from .emit import render

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_text(render("json", doc=doc) + "\n", path)


def _text(res) -> str:
    from .emit import render_rows

    lines = [f"culprits (ranked by introduced error; accumulated = error at the op in the int8 run), "
             f"{res.quantized_modules} quantized modules:"]
    crow = [(r.rank, r.module_path, r.module_type, r.op, f"{r.introduced:.3g}", f"{r.accumulated:.3g}")
            for r in res.culprits[:10]]
    lines.append(render_rows(["rank", "module_path", "type", "op", "introduced", "accumulated"], crow, "table"))
    lines.append(f"candidates (lowered and run; {res.lowerings} lowerings):")
    cols = ["keep_float", "snr_db", "mse", "latency_ms", "pte_bytes", "arena_bytes", "pareto", "chosen"]
    lines.append(render_rows(cols, [[_keep(c) or "(all int8)", _r(c.snr_db), _r(c.mse, 4),
                                     _r(c.latency_ms, 4), c.pte_bytes, c.arena_bytes, "*" if c.pareto else "",
                                     "<-" if c.chosen else ""] for c in res.candidates], "table"))
    lines.append(f"recipe: keep_float = {res.recipe.keep_float}")
    for m in res.recipe.modules:
        keeps = ", ".join(m.get("keeps_float") or []) or "nothing"
        lines.append(f"  {m['path']} ({m.get('role')}): float {keeps}: {m.get('why')}")
    if res.recipe.keep_float:
        from ..builder.recipe_apply import how_to_apply

        lines.append(f"apply it with {how_to_apply(res.backend)['quantizer']} (the recipe's 'apply' block; "
                     "docs/fix.md)")
    return "\n".join(lines)


def _r(v, digits: int = 2):
    if v is None:
        return None
    return round(v, digits) if digits <= 2 else float(f"{v:.{digits}g}")
