"""Viewer benchmark: build time, bytes per node, first paint and time to interactive in headless
Chromium, over synthetic graphs (1k, 10k, 50k nodes, with and without module hierarchy) and real
graphs (the 1000-layer MLP from ``benchmarks/_artifacts.py``: ~5k-node .pte / ETRecord stages, and
a 10k/50k tiling of it).

Goal at 10k nodes: build <= 3 s, interactive <= 3 s, <= 400 bytes per node.

Layout candidates (``--layout-candidates``): python-igraph's Sugiyama and grandalf, timed on the same
graphs, against the in-browser layered layout etlens ships (its time is inside "interactive").

Usage::

    python benchmarks/bench_viewer.py                  # synthetic + real
    python benchmarks/bench_viewer.py --sizes 1000 10000 --no-real --layout-candidates
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from etlens.model import Graph  # noqa: E402
from etlens.views.html import generate_html  # noqa: E402
from etlens.views.html.synthetic import synthetic_graph  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]


def measure_page(browser, path: str) -> tuple[float, float, float]:
    """(first paint ms, interactive ms from navigation start, JS layout ms) for one page."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:")) else r.abort())
    t0 = time.perf_counter()
    page.goto("file://" + path)
    while not page.evaluate("() => window.etlensReady === true"):
        time.sleep(0.005)
        if time.perf_counter() - t0 > 120:
            raise RuntimeError(f"{path}: page never became ready")
    wall = (time.perf_counter() - t0) * 1000
    fp = page.evaluate("() => (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || 0")
    times = page.evaluate("() => window.etlens.times")
    # interactive: the canvas answers a click (a hit test + details panel) after the ready flag
    t1 = time.perf_counter()
    page.mouse.click(500, 300)
    page.evaluate("() => document.getElementById('etl-details').textContent.length")
    click = (time.perf_counter() - t1) * 1000
    page.close()
    return fp or times["firstPaint"], max(wall, times["firstPaint"]) + click, times["layout"]


def tile(g: Graph, copies: int) -> Graph:
    """``copies`` renamed copies of ``g`` chained output-to-input (a bigger real-shaped graph)."""
    from etlens.model import Node

    out = Graph(f"{g.name}_x{copies}", dict(g.meta))
    prev_out: list[str] = []
    for c in range(copies):
        rename = {n.name: f"c{c}_{n.name}" for n in g}
        for n in g:
            if n.kind == "output":
                continue
            ins = [rename[s] for s in n.inputs]
            if n.kind == "input" and prev_out:
                out.add(Node(rename[n.name], kind="op", target="aten.alias.default", inputs=prev_out[:1],
                             outputs=n.outputs, module_stack=[(f"copy{c}", "Copy")]))
                continue
            stack = [(f"copy{c}", "Copy")] + [(f"copy{c}.{p}", t) for p, t in n.module_stack if p]
            out.add(Node(rename[n.name], kind=n.kind, target=n.target, category=n.category, inputs=ins,
                         outputs=n.outputs, module_stack=stack, stack_trace=n.stack_trace,
                         debug_handles=n.debug_handles, lineage=n.lineage, delegate=n.delegate, attrs=n.attrs))
        last = [n for n in g if n.kind == "output"]
        prev_out = [rename[s] for s in last[0].inputs] if last else []
    from etlens.model import Node as _N

    out.add(_N("output", kind="output", inputs=prev_out))
    return out


def real_graphs() -> list[tuple[str, Graph]]:
    from _artifacts import deep_artifacts  # noqa: E402

    from etlens.readers import read

    paths = deep_artifacts()
    pte = paths["pte"] if isinstance(paths, dict) else paths.pte
    etr = paths["etrecord"] if isinstance(paths, dict) else paths.etrecord
    out = []
    g = next(iter(read(pte).graphs().values()))
    out.append((f"real .pte deep_mlp(1000) {len(g)}", g))
    eg = read(etr).graphs()
    edge = [v for k, v in eg.items() if "edge" in k] or list(eg.values())
    out.append((f"real .etrecord edge {len(edge[0])}", edge[0]))
    for target in (10_000, 50_000):
        copies = max(1, round(target / len(edge[0])))
        t = tile(edge[0], copies)
        out.append((f"real edge x{copies} {len(t)}", t))
    return out


def layout_candidates(graphs: list[tuple[str, Graph]]) -> None:
    print("\nPython layout candidates (layout only, no rendering):")
    for label, g in graphs:
        names = {n.name: i for i, n in enumerate(g)}
        edges = [(names[s], names[d]) for s, d, _ in g.edges()]
        try:
            import igraph

            t = time.perf_counter()
            ig = igraph.Graph(n=len(names), edges=edges, directed=True)
            if len(g) <= 20000:
                ig.layout_sugiyama()
                print(f"  {label:40s} igraph Sugiyama   {time.perf_counter() - t:8.2f} s")
            else:
                print(f"  {label:40s} igraph Sugiyama   skipped (> 20k nodes)")
        except ImportError:
            print("  python-igraph not installed")
        try:
            from grandalf.graphs import Edge, Graph as GGraph, Vertex
            from grandalf.layouts import SugiyamaLayout

            if len(g) > 3000:
                print(f"  {label:40s} grandalf          skipped (> 3k nodes; minutes)")
                continue
            t = time.perf_counter()
            vs = [Vertex(i) for i in range(len(names))]
            for v in vs:
                v.view = type("V", (), {"w": 100, "h": 38})()
            gg = GGraph(vs, [Edge(vs[a], vs[b]) for a, b in edges])
            for comp in gg.C:
                sl = SugiyamaLayout(comp)
                sl.init_all()
                sl.draw(2)
            print(f"  {label:40s} grandalf          {time.perf_counter() - t:8.2f} s")
        except ImportError:
            print("  grandalf not installed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--layout-candidates", action="store_true")
    args = ap.parse_args()
    cases: list[tuple[str, Graph]] = []
    for n in args.sizes:
        cases.append((f"synthetic modules {n}", synthetic_graph(n)))
        cases.append((f"synthetic flat {n}", synthetic_graph(n, modules=False)))
    if not args.no_real:
        try:
            cases += real_graphs()
        except Exception as exc:  # the real artifacts need the executorch extra
            print(f"(real graphs skipped: {exc})")
    from playwright.sync_api import sync_playwright

    tmp = tempfile.mkdtemp(prefix="etlens_bench_viewer_")
    print(f"{'graph':40s} {'nodes':>7s} {'build s':>8s} {'B/node':>7s} {'paint ms':>9s} {'interact ms':>12s} "
          f"{'js layout ms':>13s}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for label, g in cases:
            path = os.path.join(tmp, label.replace(" ", "_").replace("/", "_") + ".html")
            t = time.perf_counter()
            generate_html(g, path)
            build = time.perf_counter() - t
            bpn = os.path.getsize(path) / len(g)
            fp, ti, lay = measure_page(browser, path)
            flag = "" if (len(g) > 20000 or (build <= 3 and ti <= 3000 and bpn <= 400)) else "  <- over goal"
            print(f"{label:40s} {len(g):7d} {build:8.2f} {bpn:7.0f} {fp:9.0f} {ti:12.0f} {lay:13.0f}{flag}", flush=True)
        browser.close()
    if args.layout_candidates:
        # both libraries take seconds at 1k nodes and many minutes at 10k: measure the small graphs
        layout_candidates([c for c in cases if len(c[1]) <= 3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
