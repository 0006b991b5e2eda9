"""``etlens trace``: compile a model for a backend pass by pass and write the trace (JSON, HTML)."""

from __future__ import annotations

import os

from ..errors import EtlensError, first_line
from .._progress import console
from ._common import add_command
from .options import EXIT_ERROR, EXIT_OK, add_backend, add_model_source, model_spec

_EXAMPLE = ("etlens trace --model cnn --backend xnnpack -o trace.json --html trace.html\n"
            "  etlens trace --model cnn --backend cortex_m --quantize --quantize-io -o cm.json   # + cm.pte\n"
            "  etlens trace --model my_models.py:build --backend aten -o trace.json\n"
            "  etlens trace --list-backends")


def register(sub) -> None:
    p = add_command(sub, "trace", "trace a compilation pass by pass (graph, diff, timings, debug handles)",
                    _EXAMPLE)
    add_model_source(p,
                     model_help="path/to/file.py:ATTR or MODULE:ATTR (a demo name works too); ATTR is a function "
                                "returning (model, example_inputs), or an nn.Module (then give --input-shape or "
                                "define example_inputs next to it)")
    add_backend(p, help="backend to trace ('aten' needs only PyTorch)")
    p.add_argument("-o", "--output", help="trace JSON to write (default: <model>.<backend>.trace.json)")
    p.add_argument("--html", help="also write the pass-by-pass HTML viewer here")
    p.add_argument("--quantize", action="store_true", help="pt2e-quantize with the backend's quantizer first")
    p.add_argument("--quantize-io", action="store_true",
                   help="with --quantize: strip the float (de)quantize wrapper so the program takes/returns int8")
    p.add_argument("--no-lower", action="store_true", help="stop before partitioning/lowering")
    p.add_argument("--no-times", action="store_true",
                   help="store zero wall times (byte-identical files for identical runs)")
    p.add_argument("--input-shape", action="append", default=[], metavar="D0,D1,...",
                   help="example input shape (repeat for several inputs) when ATTR is a plain nn.Module")
    p.add_argument("--pte", help="where to write the ExecuTorch program for backends whose passes produce it "
                                 "(cortex_m; default: the trace's path with .pte)")
    p.add_argument("--list-backends", action="store_true",
                   help="list backends, whether they are usable, and what to install for those that are not")
    p.set_defaults(func=run)


def _list_backends() -> int:
    from ..builder.backends import available_backends, get_backend

    for name, reason in available_backends().items():
        cfg = get_backend(name)
        state = "ok" if reason is None else f"unavailable: {reason}"
        print(f"{name:10} {cfg.description}\n{'':10} [{state}]")
        if reason is not None:
            print(f"{'':10} to use it: {cfg.advice()}")
    return EXIT_OK


def _runtime_note(trace, pte: str, session) -> str | None:
    """One line when the pip ExecuTorch runtime has no kernel for some operator of the program
    (``""`` when it has them all, ``None`` when the runtime could not be asked).

    The operators are those of the trace's last snapshot (the program the ``.pte`` holds), spelled
    as ExecuTorch's operator table spells them (``cortex_m::quantized_linear.out``).
    """
    last = trace.snapshots[-1].graph
    ops = sorted({"::".join(n.target.split(".", 1)) for n in last
                  if n.kind == "op" and n.target and n.target.count(".") >= 2})
    try:  # a worker job: loading the runtime's native library stays out of this process
        have = set(session.worker.list_operators())
    except (OSError, EtlensError):
        return None
    lacking = [op for op in ops if op not in have]
    if not lacking:
        return ""
    return (f"note: the pip ExecuTorch runtime has no kernels for {', '.join(lacking)}: {pte} runs on the "
            f"target (an ExecuTorch runtime built with those kernels), not here; 'etlens info {pte}' lists its "
            "kernels, the trace's last snapshot is its graph and memory plan")


def _run_here(pte: str, session) -> str:
    """Run ``pte`` in the ExecuTorch runtime (the session's child) and compare its outputs with the model's."""
    import tempfile

    import torch

    from ..builder.inputs import flatten_inputs

    model, inputs = session.model, session.inputs  # the layout the session exported with
    with tempfile.TemporaryDirectory() as tmp:
        try:
            got = session.run(pte, inputs, runs=1, etdump=os.path.join(tmp, "run.etdp"))
        except EtlensError as exc:
            return f"note: running {pte} in the ExecuTorch runtime here failed: {first_line(exc, 1000)}"
    with torch.no_grad():
        ref = model(*inputs)
    ref = flatten_inputs(ref)  # (out, (h, c)) -> [out, h, c], the runtime's output order
    diff = max(float((g.float() - r.float()).abs().max()) for g, r in zip(got, ref))
    return f"ran {pte} in the ExecuTorch runtime here: max abs difference {diff:.3g} from the model"


def run(args) -> int:
    if args.list_backends:
        return _list_backends()
    spec = model_spec(args)
    if not spec:
        raise EtlensError("etlens trace: give --model FILE.py:FN (or MODULE:FN) or --demo NAME; see 'etlens demos'")
    if args.model and args.demo:
        raise EtlensError("etlens trace: give --model or --demo, not both")
    from ..builder.backends import get_backend
    from ..builder.session import BuildSession

    get_backend(args.backend).check_available()  # fail before building the model
    # the session's child imports torch + the backend while the model loads; it traces the lowering (no run)
    session = BuildSession.load(spec, input_shapes=args.input_shape, backend=args.backend, quantize=args.quantize)
    with session:
        status = _trace(args, session)
    return status


def _trace(args, session) -> int:
    from .._progress import progress
    from ..builder.backends import get_backend

    name = session.name = session.attr or session.name
    out = args.output or f"{name}.{args.backend}.trace.json"
    pte = None
    if get_backend(args.backend).to_executorch and not args.no_lower:
        stem = out
        for suffix in (".trace.json", ".json"):
            if stem.endswith(suffix):
                stem = stem[:-len(suffix)]
                break
        pte = args.pte or stem + ".pte"
    elif args.pte:
        raise EtlensError(f"--pte: the {args.backend} trace does not emit an ExecuTorch program (only backends whose "
                          "passes rewrite the whole program do, e.g. cortex_m, and not with --no-lower); "
                          "'etlens report' writes the .pte of a lowered model")
    bar = progress(desc=f"trace {args.backend}", unit="stage")
    session.on_stage = lambda label: (bar.set_postfix_str(label.split(":", 1)[-1][:40], refresh=False),
                                      bar.update(1))
    try:
        trace = session.trace_lowering(out, quantize_io=args.quantize_io, lower=not args.no_lower,
                                       record_times=not args.no_times, pte=pte)
    finally:
        bar.close()
    passes = sum(1 for s in trace.snapshots if s.stage == "pass")
    lost = sum(len(s.handle_report.get("lost") or []) for s in trace.snapshots)
    print(f"wrote {out}: {len(trace.snapshots)} snapshots ({passes} passes) of {name} for {args.backend}"
          + (f"; {lost} node(s) lost debug handles (see handle_report)" if lost else ""))
    if pte is not None and trace.meta.get("pte"):
        print(f"wrote {pte}")
        note = _runtime_note(trace, pte, session)
        if note:
            print(note)
        elif note == "" and not args.quantize_io:
            print(_run_here(pte, session))
    if args.html:
        try:
            from ..views.html import generate_multi_pass_html
        except ImportError as exc:
            raise EtlensError(f"--html needs the HTML viewer (etlens.views.html.generate_multi_pass_html), which "
                              f"is not available in this install ({exc}); the trace JSON was written to {out}") from exc
        generate_multi_pass_html(trace, args.html)
        print(f"wrote {args.html}")
    failed = trace.failed
    if failed is not None:
        print(f"etlens: error: {failed.error['message']} (trace written to {os.path.abspath(out)}; the "
              f"traceback is in snapshot {failed.index} {failed.name!r})", file=console())
        return EXIT_ERROR
    return EXIT_OK
