"""Regenerate icicle-vit.png and overlay-per-node.png (needs the executorch extra and chromium).

    python docs/screenshots/make_attribution_screenshots.py

ViT (``tests/corpus/models.py:vit``, fp32) and the demo CNN, lowered to XNNPACK and run 3 times with
ETDump; the report's module-time icicle of the ViT and the CNN's latency overlay with one
convolution selected (each node of the one delegate reads its own time).
"""

from __future__ import annotations

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "src"))

ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run"]


def report(model, inputs, out: str) -> str:
    from etlens.report import report_from_artifacts
    from etlens.builder.pipeline import build_and_run

    arts = build_and_run(model, inputs, out, name="m", runs=3, debug_buffer_size=64 << 20)
    return report_from_artifacts(arts.etdump, os.path.join(out, "report.html"), etrecord=arts.etrecord,
                                 debug_buffer=arts.debug_buffer, pte=arts.pte).path


def main() -> None:
    from playwright.sync_api import sync_playwright

    from etlens.demos import get_demo
    from tests.corpus.models import build

    with tempfile.TemporaryDirectory() as tmp:
        vit = report(*build("vit"), os.path.join(tmp, "vit"))
        cnn = report(*get_demo("cnn"), os.path.join(tmp, "cnn"))
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            pg = b.new_page(viewport={"width": 1100, "height": 900})
            pg.goto("file://" + vit)
            el = pg.locator("#module-time .etlens-icicle-wrap")
            el.scroll_into_view_if_needed()
            el.screenshot(path=os.path.join(HERE, "icicle-vit.png"))
            pg = b.new_page(viewport={"width": 1200, "height": 800})
            pg.goto("file://" + os.path.join(os.path.dirname(cnn), "report.graph-latency.html"))
            for _ in range(200):
                if pg.evaluate("() => window.etlensReady === true"):
                    break
                pg.wait_for_timeout(50)
            pos = pg.evaluate("""() => { const M = window.etlens.views[0].M;
                const name = [...M.byName.keys()].find(k => k.includes('conv') && k.endsWith('_2'));
                return name ? window.etlens.screenPos(name) : null; }""")
            if pos:
                pg.mouse.click(pos["x"], pos["y"])
                pg.wait_for_timeout(300)
            pg.screenshot(path=os.path.join(HERE, "overlay-per-node.png"))
            b.close()


if __name__ == "__main__":
    main()
