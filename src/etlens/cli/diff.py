"""``etlens diff A B``: what changed between two builds, two programs (``.pte``), ETRecords or traces.

Two build directories (each one lowering's ``.pte``, ``.etrecord``, ``.etdp`` …), or ``--model`` with
two build settings (``--a-backend`` / ``--b-backend``, ``--a-quantize`` / ``--b-quantize``,
``--a-recipe`` / ``--b-recipe``): the build diff (:mod:`etlens.analysis.build_diff`) — source ops
aligned across the builds, the causes of the time, file and arena change ranked by share, a headline,
gates (``--fail-on-slowdown R``, ``--fail-on-growth BYTES``: exit 3) and ``--html`` the two graphs side
by side with the changed ops marked. The ``.pte`` structural diff and the memory deltas are its
``program`` part.

Two ``.pte``: ExecuTorch ``diff_pte``'s report (operators/delegates only in one, counts,
``non_const_buffer_sizes``, tensor metadata/data diffs, named data, extra plans) plus memory and
size deltas. Any other pair (ETRecords, traces, .pt2, graph JSON): the graph-level structural diff
(added / removed / rewritten / replaced nodes). ``--html`` writes the side-by-side viewer of both
graphs (selecting a node highlights its counterpart).
"""

from __future__ import annotations

import os

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_gate, add_model_source, add_output, gate_failed

__all__ = ["register", "run"]


def register(sub) -> None:
    p = add_command(sub, "diff", "what changed between two builds (directories of artifacts, or --model with two "
                    "build settings), two .pte programs, or two ETRecords / traces",
                    "etlens diff builds/v1 builds/v2 --format json -o diff.json --fail-on-slowdown 1.2")
    p.add_argument("a", nargs="?", help="first build directory or file (A)")
    p.add_argument("b", nargs="?", help="second build directory or file (B)")
    add_output(p)
    p.add_argument("--html", metavar="FILE", help="also write the side-by-side graph viewer of A and B (build "
                                                  "diff: changed ops marked)")
    g = p.add_argument_group("build diff from a model (instead of A and B)")
    add_model_source(g)
    for side in ("a", "b"):
        g.add_argument(f"--{side}-backend", metavar="NAME", default="xnnpack",
                       help=f"backend of build {side.upper()} (a registered backend name; default xnnpack)")
        g.add_argument(f"--{side}-quantize", action="store_true", help=f"pt2e-quantize build {side.upper()}")
        g.add_argument(f"--{side}-recipe", metavar="FILE",
                       help=f"keep-in-float recipe of build {side.upper()} (implies --{side}-quantize)")
    g.add_argument("--runs", type=int, default=10, help="runs of each built program (default 10)")
    g.add_argument("--keep", metavar="DIR", help="write the two builds to DIR/a and DIR/b (default: a temporary "
                                                 "directory)")
    p.add_argument("--noise", type=float, metavar="R",
                   help="minimum relative change of Method::execute that counts (default 0.05 when the programs "
                        "differ, 0.25 for one program run twice)")
    add_gate(p, "slowdown", "build diff: fail when B's time is more than R times A's (per-run mean of "
                            "Method::execute) and the change is beyond noise", metavar="R")
    add_gate(p, "growth", "build diff: fail when B's .pte or planned arena is more than BYTES bytes larger than A's",
             metavar="BYTES", type=int)
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


def _is_build(path: str | None) -> bool:
    return path is not None and os.path.isdir(path)


def run(args) -> int:
    from ..errors import EtlensError
    from .options import model_spec

    spec = model_spec(args)
    if spec is not None:
        if args.a or args.b:
            raise EtlensError("diff: give two build directories (A B) or --model with two build settings, not both")
        return _run_model(args, spec)
    if not (args.a and args.b):
        raise EtlensError("diff: give A and B (two build directories, two .pte, ETRecords or traces), or --model "
                          "F:fn with --a-backend/--b-backend, --a-quantize/--b-quantize")
    if _is_build(args.a) or _is_build(args.b):
        if not (_is_build(args.a) and _is_build(args.b)):
            raise EtlensError(f"diff: {args.a if not _is_build(args.a) else args.b} is not a directory: give two "
                              "build directories (each a .pte, its .etrecord and .etdp), or two files")
        return _run_builds(args, args.a, args.b)
    return _run_files(args)


def _run_files(args) -> int:
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


def _run_builds(args, dir_a: str, dir_b: str, reasons: dict[str, str] | None = None) -> int:
    from ..analysis.build_diff import diff_loaded, load_build
    from ..views.build_diff import ROW_COLUMNS, build_diff_rows, build_diff_text

    a, b = load_build(dir_a), load_build(dir_b)
    b.reasons = dict(reasons or {})
    d = diff_loaded(a, b, noise=args.noise)
    doc = d.to_json()
    emit(args, doc=doc, rows=(list(ROW_COLUMNS), build_diff_rows(d)), text=lambda: build_diff_text(d))
    if args.html:
        from ..views.build_diff import write_build_diff_html

        write_build_diff_html(d, args.html)
    return _gates(args, d)


def _gates(args, d) -> int:
    s = d.summary
    fails = []
    r = args.fail_on_slowdown
    if r is not None and s["time_ratio"] is not None and s["time_ratio"] > r and s["verdict"] == "slower":
        fails.append(f"B is {s['time_ratio']:.2f}x A's time > --fail-on-slowdown {r:g}")
    g = args.fail_on_growth
    if g is not None:
        for what, key in (("the .pte", "size_bytes"), ("the planned arena", "arena_bytes")):
            delta = s[key]["b"] - s[key]["a"]
            if delta > g:
                fails.append(f"{what} grew by {delta:,} B > --fail-on-growth {g:,}")
    if fails:
        top = d.causes[0] if d.causes else None
        cause = f"; top cause: {top.module_path or 'the whole program'} ({top.kind}, {top.share:.0%}): " \
                f"{top.explanation}" if top else ""
        return gate_failed("; ".join(fails) + cause)
    return EXIT_OK


def _run_model(args, spec: str) -> int:
    import tempfile

    from ..builder import BuildSession

    from ..builder.backends import backend_names
    from ..errors import EtlensError

    for side in ("a", "b"):
        name = getattr(args, f"{side}_backend")
        if name not in backend_names():
            raise EtlensError(f"--{side}-backend {name!r}: not a registered backend ({', '.join(backend_names())})")
    out = args.keep or tempfile.mkdtemp(prefix="etlens-diff-")
    dirs = {}
    session = BuildSession.load(spec, backend=args.a_backend, quantize=bool(args.a_quantize or args.a_recipe),
                                verbose=args.verbose)
    try:
        for side in ("a", "b"):
            backend = getattr(args, f"{side}_backend")
            quant = bool(getattr(args, f"{side}_quantize") or getattr(args, f"{side}_recipe"))
            recipe = getattr(args, f"{side}_recipe")
            if recipe:
                from ..builder.recipe import apply_recipe

                s = apply_recipe(session.variant(backend=backend, quantize=True), recipe, name="model")
            else:
                s = session.variant(name="model", backend=backend, quantize=quant)
            with s:
                arts = s.build(os.path.join(out, side), runs=args.runs)
            dirs[side] = os.path.dirname(arts.pte)
    finally:
        session.close()
    return _run_builds(args, dirs["a"], dirs["b"], reasons=_partitioner_reasons(args.b_backend, dirs["b"]))


def _partitioner_reasons(backend: str, build_dir: str) -> dict[str, str]:
    """Why ``backend``'s partitioner left each node of the build in ``build_dir`` out (its support checks
    replayed on the ETRecord's edge program); a failure is no reasons, never an error."""
    from ..builder.toolchain import backend_config

    cfg = backend_config(backend)
    parts = cfg.partitioners()
    if not parts:
        return {"*": f"{backend} delegates nothing: the portable kernels run every op"}
    try:
        from ..analysis.build_diff import find_artifacts
        from ..analysis.delegation import get_delegation_info

        files = find_artifacts(build_dir)
        info = get_delegation_info(files.etrecord, partitioner=parts, pte=files.pte)
        return {n.name: n.reason for n in info.non_delegated if n.reason}
    except Exception:  # noqa: BLE001 - reasons are an extra: the diff goes on without them
        return {}
