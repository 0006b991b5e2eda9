"""``etlens view ARTIFACT``: write the graph(s) of any artifact as one self-contained HTML page.

One graph opens the single-graph viewer; a pass trace opens the pass stepper; several stages
(``.etrecord``: ATen, edge, lowered; ``.pte`` with several methods) open side by side with
lineage-synchronised selection (``--steps`` shows them as a stepper instead).
"""

from __future__ import annotations

from ._common import add_command
from .options import EXIT_OK


def register(sub) -> None:
    p = add_command(sub, "view", "write an offline HTML graph viewer for .pt2/.pte/.etrecord/trace/graph JSON",
                    "etlens view model.etrecord -o graph.html --all-stages")
    p.add_argument("artifact", help="path to the file (.pt2, .pte, .etrecord, pass-trace JSON, graph JSON)")
    p.add_argument("-o", "--output", default=None, help="HTML file to write (default: ARTIFACT.html)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--stage", help="show only this stage / method (see `etlens info`)")
    which.add_argument("--all-stages", action="store_true", help="show every stage side by side (the default)")
    p.add_argument("--steps", action="store_true", help="show several stages as a pass stepper instead of side by side")
    p.add_argument("--title", help="page title")
    p.set_defaults(func=run)


def run(args) -> int:
    import os

    from ..errors import EtlensError
    from ..readers import read
    from ..views.html import generate_compare_html, generate_html, generate_multi_pass_html

    art = read(args.artifact)
    out = args.output or os.path.splitext(os.fspath(args.artifact))[0] + ".html"
    trace = getattr(art, "trace", None)
    if trace is not None and getattr(trace, "snapshots", None) and not args.stage:
        generate_multi_pass_html(trace, out, title=args.title)
        print(f"wrote {out} ({len(trace.snapshots)} passes)")
        return EXIT_OK
    if args.stage:
        graphs = {args.stage: art.graph(stage=args.stage)}
    else:
        graphs = art.graphs()
        if not graphs:
            raise EtlensError(f"{args.artifact}: contains no graph to show")
    if len(graphs) == 1:
        name, g = next(iter(graphs.items()))
        generate_html(g, out, title=args.title or f"{os.path.basename(args.artifact)} · {name}")
        print(f"wrote {out} ({len(g)} nodes)")
    elif args.steps:
        generate_multi_pass_html(list(graphs.items()), out, title=args.title or os.path.basename(args.artifact))
        print(f"wrote {out} ({len(graphs)} stages as steps)")
    else:
        generate_compare_html(graphs, out, title=args.title or os.path.basename(args.artifact))
        print(f"wrote {out} ({len(graphs)} stages side by side)")
    return EXIT_OK
