"""``etlens model-explorer ARTIFACT -o graph.json``: Model Explorer graph JSON, partition styles, overlays."""

from __future__ import annotations

from ._common import add_command
from .options import EXIT_OK


def register(sub) -> None:
    p = add_command(
        sub, "model-explorer",
        "write Model Explorer graph JSON (module namespaces, partitions, QDQ clusters, overlays)",
        "etlens model-explorer model.etrecord -o graph.json --clusters --node-data latency=lat.json",
        description="Writes a graph-collection JSON that Model Explorer (pip install ai-edge-model-explorer) "
                    "opens, a <stem>.style.json of node-styler rules colouring each partition, and one "
                    "<stem>.<name>.nodedata.json per --node-data overlay. An Ethos-U ETRecord with its Vela "
                    "sidecar (MODEL.vela.json) also gets an 'npu_cycles' overlay (Vela's estimate per node).")
    p.add_argument("artifact", help=".etrecord, .pte, .pt2 or etlens trace/graph JSON")
    p.add_argument("-o", "--output", required=True, help="graph JSON to write (e.g. graph.json)")
    p.add_argument("--clusters", action="store_true",
                   help="expand delegates in place and group nodes by partition and QDQ cluster")
    p.add_argument("--node-data", action="append", default=[], metavar="NAME=PATH",
                   help="overlay: JSON {node or debug handle: number} (repeatable)")
    p.add_argument("--method", default=None, help="method of a multi-method program (default: forward)")
    p.add_argument("--label", default=None, help="collection label shown in Model Explorer")
    p.add_argument("--open", action="store_true", help="also open it in Model Explorer (needs the package)")
    p.set_defaults(func=run)


def run(args) -> int:
    import os

    from ..errors import EtlensError
    from ..views.model_explorer import load_node_values, write_model_explorer

    overlays = {}
    for item in args.node_data:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise EtlensError(f"--node-data {item!r}: expected NAME=PATH (e.g. latency=latency.json)")
        overlays[name] = load_node_values(path)
    if str(args.artifact).endswith(".etrecord"):
        from ..backends import hooks

        for _, delegation in hooks("delegation"):  # e.g. an Ethos-U build: Vela's NPU cycles per node
            node_overlays = getattr(delegation, "node_overlays", None)
            for name, values in (node_overlays(args.artifact, method=args.method) if node_overlays else {}).items():
                overlays.setdefault(name, values)
    from ..readers.program import resolve_program

    label = args.label or os.path.basename(args.artifact)
    program = resolve_program(args.artifact, args.method, "lowered")  # the file is read here, once
    paths = write_model_explorer(program, args.output, method=args.method, clusters=args.clusters,
                                 node_data_values=overlays, label=label)
    print(f"wrote {paths['graph']} ({paths['graphs']} graph(s), {paths['nodes']} nodes)")
    print(f"wrote {paths['style']} (node-styler rules: one colour per partition)")
    for name, p in paths["node_data"].items():
        print(f"wrote {p} (node data {name!r})")
    if args.open:
        import json

        from ..views.model_explorer import launch

        with open(paths["graph"], encoding="utf-8") as f:
            launch(json.load(f), reuse_server=True, no_open_in_browser=False, node_data_values=overlays)
    else:
        print("open it: model-explorer, then upload the graph JSON (or pass --open)")
    return EXIT_OK
