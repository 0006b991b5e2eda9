"""Write every etlens output for the committed artifacts into ``argv[1]`` (run twice, compared).

Run as a script by ``test_determinism.py`` in two processes with different ``PYTHONHASHSEED`` and
different output directories; every file must come out byte-identical.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def main(out: str) -> None:
    from etlens.analysis.inspector import Inspector
    from etlens.cli.main import main as cli
    from etlens.model.trace import Snapshot, Trace
    from etlens.readers import read
    from etlens.readers.trace import read as read_trace
    from etlens.report import report_from_artifacts
    from etlens.views.html import generate_compare_html, generate_html, generate_multi_pass_html
    from etlens.views.model_explorer import to_model_explorer_json
    from etlens.views.perfetto import perfetto_trace

    o = Path(out)
    o.mkdir(parents=True, exist_ok=True)
    case = "mlp_xnnpack"
    pte, etrecord = DATA / f"{case}.pte", DATA / f"{case}.etrecord"
    etdp, dbg = DATA / "mlp_portable.etdp", DATA / "mlp_portable.debug.bin"

    graphs = {}
    for p in (pte, etrecord, DATA / "mlp_portable.pte"):
        for name, g in read(p).graphs().items():
            key = f"{p.name}.{name.replace('/', '_')}"
            graphs[key] = g
            (o / f"{key}.graph.json").write_text(json.dumps(g.to_json(), ensure_ascii=False))
    # trace JSON: written, read back, written again
    gs = list(graphs.values())
    t = Trace(model=case, backend="xnnpack", snapshots=[Snapshot(name=f"s{i}", stage="pass", index=i, graph=g)
                                                         for i, g in enumerate(gs)])
    t.save(o / "trace.json")
    read_trace(o / "trace.json").trace.save(o / "trace.roundtrip.json")

    first = graphs[f"{pte.name}.forward"]
    generate_html(first, o / "viewer.html")
    generate_compare_html(gs[:3], o / "compare.html")
    generate_multi_pass_html(t, o / "passes.html")
    (o / "model_explorer.json").write_text(json.dumps(to_model_explorer_json(str(pte)), ensure_ascii=False))
    insp = Inspector(etdump_path=str(etdp), debug_buffer_path=str(dbg))
    (o / "perfetto.json").write_text(json.dumps(perfetto_trace(insp), ensure_ascii=False))
    report_from_artifacts(str(etdp), str(o / "report.html"), etrecord=str(DATA / "mlp_portable.etrecord"),
                          debug_buffer=str(dbg), pte=str(DATA / "mlp_portable.pte"))
    for p in (pte, etrecord, etdp, DATA / "mlp_portable.pt2"):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = cli(["info", str(p), "--json"])
        assert rc == 0, (p, rc)
        (o / f"info.{p.name}.json").write_text(buf.getvalue())


if __name__ == "__main__":
    main(sys.argv[1])
