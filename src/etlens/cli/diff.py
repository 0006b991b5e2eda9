"""``etlens diff A B``: what changed between two programs (``.pte``), ETRecords or traces.

Two ``.pte``: ExecuTorch ``diff_pte``'s report (operators/delegates only in one, counts,
``non_const_buffer_sizes``, tensor metadata/data diffs, named data, extra plans) plus memory and
size deltas. Any other pair (ETRecords, traces, .pt2, graph JSON): the graph-level structural diff
(added / removed / rewritten / replaced nodes). ``--html`` writes the side-by-side viewer of both
graphs (selecting a node highlights its counterpart).
"""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_output

__all__ = ["register", "run"]


def register(sub) -> None:
    p = add_command(sub, "diff", "what changed between two .pte programs (or two ETRecords / traces: graph diff)",
                    "etlens diff old.pte new.pte --format json -o diff.json --html diff.html")
    p.add_argument("a", help="first file (A)")
    p.add_argument("b", help="second file (B)")
    add_output(p)
    p.add_argument("--html", metavar="FILE", help="also write the side-by-side graph viewer of A and B")
    p.set_defaults(func=run)


def _graph_diff(a, b) -> dict:
    from ..model.diff import diff_graphs

    out = {}
    ga, gb = a.graphs(), b.graphs()
    for name in sorted(set(ga) | set(gb)):
        if name in ga and name in gb:
            d = diff_graphs(ga[name], gb[name])
            out[name] = {**d.to_json(), "nodes_a": len(ga[name]), "nodes_b": len(gb[name])}
        else:
            out[name] = {"only_in": "A" if name in ga else "B"}
    return out


def _format(d: dict) -> str:
    lines = [f"A {d['path_a']} ({d.get('size_a', '?')} bytes) vs B {d['path_b']} ({d.get('size_b', '?')} bytes)"]
    if d.get("bitwise_equal"):
        lines.append("bitwise equal")
    for p in d.get("plans", []):
        lines.append(f"plan {p['plan_index']} {p['name']!r}:")
        for k in ("operators_only_in_a", "operators_only_in_b", "delegates_only_in_a", "delegates_only_in_b"):
            if p[k]:
                lines.append(f"  {k}: {', '.join(p[k])}")
        for k in ("non_const_buffer_sizes", "value_count", "instruction_count"):
            if p[f"{k}_a"] is not None:
                lines.append(f"  {k}: {p[f'{k}_a']} vs {p[f'{k}_b']}")
        for t in p["tensor_diffs"][:20]:
            extra = "".join(f"; {m['field_name']}: {m['value_a']} vs {m['value_b']}" for m in t["metadata_diffs"])
            if t["bytes_differ"] and t["num_elements"]:
                extra += (f"; {t['num_differing']}/{t['num_elements']} elements differ, max_abs_diff "
                          f"{t['max_abs_diff']:.6g}, mean_abs_diff {t['mean_abs_diff']:.6g}")
            elif t["bytes_differ"]:
                extra += f"; constant data only in {'A' if t.get('byte_size_a') else 'B'}"
            lines.append(f"  value {t['evalue_index']}{extra}")
        if len(p["tensor_diffs"]) > 20:
            lines.append(f"  ... {len(p['tensor_diffs']) - 20} more differing tensors")
    for k in ("extra_plans_in_a", "extra_plans_in_b"):
        if d.get(k):
            lines.append(f"{k}: {', '.join(d[k])}")
    for nd in d.get("named_data_diffs", []):
        lines.append(f"named data {nd['key']!r} only in {nd['only_in']}")
    for m in d.get("memory", []):
        for a in m["arenas"]:
            lines.append(f"memory {m['method']} arena {a['id']}: {a['size_a']} -> {a['size_b']} B "
                         f"({a['size_delta']:+d}), peak {a['peak_live_a']} -> {a['peak_live_b']} B")
    if "size" in d:
        s = d["size"]
        lines.append(f"file size: {s['total_a']} -> {s['total_b']} B ({s['delta']:+d})")
        for k, v in s["by_kind"].items():
            if v["delta"]:
                lines.append(f"  {k}: {v['a']} -> {v['b']} B ({v['delta']:+d})")
    for name, g in d.get("graphs", {}).items():
        if "only_in" in g:
            lines.append(f"graph {name}: only in {g['only_in']}")
            continue
        lines.append(f"graph {name}: {g['nodes_a']} -> {g['nodes_b']} nodes; added {len(g['added'])}, removed "
                     f"{len(g['removed'])}, rewritten {len(g['rewritten'])}, replaced {len(g['replaced'])}")
        for k in ("added", "removed", "rewritten", "replaced"):
            if g[k]:
                lines.append(f"  {k}: {', '.join(g[k][:12])}{' ...' if len(g[k]) > 12 else ''}")
    return "\n".join(lines)


def run(args) -> int:
    from ..readers import read, sniff

    fa, fb = sniff(args.a).format, sniff(args.b).format
    art_a, art_b = read(args.a), read(args.b)
    if fa == "pte" and fb == "pte":
        from ..analysis.program_diff import diff_programs

        d = diff_programs(args.a, args.b)
    else:
        d = {"path_a": args.a, "path_b": args.b, "format_a": fa, "format_b": fb}
    d["graphs"] = _graph_diff(art_a, art_b)
    emit(args, doc=d, text=lambda: _format(d))   # CSV/TSV: one field,value row per field of the document
    if args.html:
        from ..views.html import generate_compare_html

        ga, gb = art_a.graph(prefer=("forward",)), art_b.graph(prefer=("forward",))
        generate_compare_html([("A: " + args.a, ga), ("B: " + args.b, gb)], args.html,
                              title=f"diff {args.a} vs {args.b}")
    return EXIT_OK
