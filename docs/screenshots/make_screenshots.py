"""Regenerate the viewer screenshots in docs/screenshots (needs the executorch extra and chromium).

    python docs/screenshots/make_screenshots.py

Real models: demo ``transformer`` and ``cnn`` (torch.export, ATen), demo ``mixed`` lowered with the
XNNPACK partitioner (partially delegated), shown alone and side by side with its ATen graph and the
``.pte``; its pass trace (``trace_passes``) at the lowering step; plus a 50k-node synthetic model opening as
module boxes.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "src"))

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]


def build_pages(tmp: str) -> list[tuple[str, str, list]]:
    import torch
    from generate import lower

    from etlens.demos import get_demo
    from etlens.readers import read_object
    from etlens.views.html import generate_compare_html, generate_html, generate_multi_pass_html
    from etlens.views.html.synthetic import synthetic_graph

    def first(art):
        return next(iter(art.graphs().values()))

    pages = []
    for demo in ("transformer", "cnn"):
        model, inputs = get_demo(demo)
        g = first(read_object(torch.export.export(model, inputs), name=demo))
        pages.append((demo, generate_html(g, os.path.join(tmp, f"{demo}.html"), title=f"demo {demo} · ATen"), []))
        if demo == "transformer":
            import math

            values = {n.name: float(math.prod(n.outputs[0].shape)) for n in g
                      if n.kind == "op" and n.outputs and all(isinstance(d, int) for d in n.outputs[0].shape)}
            pages.append(("overlay", generate_html(g, os.path.join(tmp, "overlay.html"), overlay=values,
                                                   overlay_label="output elements",
                                                   title="demo transformer · overlay"), [("click", "linear_1")]))
    model, inputs = get_demo("mixed")
    ep, edge, et = lower(model, inputs, delegate=True)
    aten = first(read_object(ep, name="aten"))
    lowered = first(read_object(edge.exported_program(), name="lowered"))
    pte_path = os.path.join(tmp, "mixed.pte")
    with open(pte_path, "wb") as f:
        f.write(et.buffer)
    from etlens.readers import read

    pte = first(read(pte_path))
    pages.append(("mixed_delegated", generate_html(lowered, os.path.join(tmp, "mixed.html"),
                                                   title="demo mixed · lowered with XNNPACK (partial)"),
                  [("click", "executorch_call_delegate_1")]))
    pages.append(("compare", generate_compare_html({"ATen": aten, "lowered (XNNPACK)": lowered, ".pte": pte},
                                                   os.path.join(tmp, "compare.html")), [("click", "linear_1")]))
    from etlens.builder.traced import trace_passes

    model, inputs = get_demo("mixed")
    trace = trace_passes(model, inputs, backend="xnnpack")  # 20 snapshots: export, to_edge, passes, lower
    pages.append(("passes", generate_multi_pass_html(trace, os.path.join(tmp, "passes.html")),
                  [("key", "End"), ("click", "executorch_call_delegate")]))
    pages.append(("big_50k", generate_html(synthetic_graph(50_000), os.path.join(tmp, "big.html")), []))
    return pages


def main() -> int:
    from playwright.sync_api import sync_playwright

    tmp = tempfile.mkdtemp(prefix="etlens_shots_")
    pages = build_pages(tmp)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for name, path, actions in pages:
            page = b.new_page(viewport={"width": 1400, "height": 860})
            page.goto("file://" + path)
            while not page.evaluate("() => window.etlensReady === true"):
                time.sleep(0.02)
            for kind, arg in actions:
                if kind == "click":
                    pos = page.evaluate("(n) => window.etlens.screenPos(n, 0)", arg)
                    page.mouse.click(pos["x"], pos["y"])
                elif arg == "End":  # the last pass (lowering)
                    page.evaluate("() => window.etlens.step(window.etlens.snapshotCount() - 1)")
                else:
                    page.locator("canvas.etl-canvas").first.focus()
                    page.keyboard.press(arg)
            page.wait_for_timeout(150)
            out = os.path.join(HERE, f"{name}.png")
            page.screenshot(path=out)
            print(out, os.path.getsize(out) // 1024, "KB")
            page.close()
        b.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
