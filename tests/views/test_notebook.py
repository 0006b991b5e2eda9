"""Rich notebook display (etlens.views.notebook): bundles, IPython registration, etlens.show, plain-shell text.

Objects come from the committed real artifacts in tests/data (ExecuTorch 1.5.1, the MLP lowered to XNNPACK).
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import etlens
from etlens.errors import EtlensError
from etlens.model.trace import Snapshot, Trace
from etlens.views.notebook import FORMATTED_TYPES, Display, mimebundle, page_for, register_formatters

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
PTE, ETREC = str(DATA / "mlp_xnnpack.pte"), str(DATA / "mlp_xnnpack.etrecord")
ETDP, BUF = str(DATA / "mlp_xnnpack.etdp"), str(DATA / "mlp_xnnpack.debug.bin")

#: builds each object from the committed artifacts; the same code runs in the plain-shell subprocess
OBJECTS = {
    "graph": "etlens.read(PTE).graph()",
    "graphs": "[etlens.read(ETREC).graph(stage='exported_program'), etlens.read(PTE).graph()]",
    "trace": ("Trace('mlp', 'xnnpack', snapshots=[Snapshot('export', 'export', 0, etlens.read(ETREC).graph("
              "stage='exported_program')), Snapshot('lower', 'lower', 1, etlens.read(ETREC).graph())])"),
    "artifact": "etlens.read(ETREC)",
    "delegation": "etlens.get_delegation_info(ETREC)",
    "memory": "__import__('etlens.analysis.memory', fromlist=['x']).analyze_memory(etlens.read(PTE))",
    "size": "__import__('etlens.analysis.size', fromlist=['x']).size_of_file(PTE)",
    "inspector": "etlens.Inspector(etdump_path=ETDP, etrecord=ETREC, debug_buffer_path=BUF)",
    "compare": ("__import__('etlens.fleet', fromlist=['x']).compare(*[__import__('etlens.fleet', fromlist=['x'])"
                ".Side.of_etdumps([ETDP], ETREC)] * 2)"),
}

_SCOPE = {"etlens": etlens, "PTE": PTE, "ETREC": ETREC, "ETDP": ETDP, "BUF": BUF, "Trace": Trace,
          "Snapshot": Snapshot}


def _make(kind: str):
    return eval(OBJECTS[kind], dict(_SCOPE))  # noqa: S307 - the test's own expressions


def _srcdoc(bundle_html: str) -> str:
    m = re.search(r'srcdoc="([^"]*)"', bundle_html)
    assert m, bundle_html[:300]
    return html.unescape(m.group(1))


@pytest.mark.parametrize("kind", sorted(OBJECTS))
def test_bundle_is_the_sandboxed_offline_page(kind):
    obj = _make(kind)
    b = mimebundle(obj)
    assert set(b) == {"text/html", "text/plain"}
    text = b["text/plain"]
    assert "\n" not in text and text.startswith("<etlens") and text.endswith(">"), text
    frame = b["text/html"]
    assert "<iframe sandbox='allow-scripts'" in frame and "allow-same-origin" not in frame
    assert "resize:vertical" in frame and "width:100%" in frame
    page = _srcdoc(frame)
    assert page.lower().startswith("<!doctype html>")
    assert "Content-Security-Policy" in page and "default-src 'none'" in page and "connect-src 'none'" in page
    # nothing loaded from anywhere: no src/href to a URL, no CDN
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page), kind


def test_graph_page_is_the_page_written_to_disk(tmp_path):
    g = _make("graph")
    path = etlens.generate_html(g, tmp_path / "g.html")
    assert _srcdoc(mimebundle(g)["text/html"]) == Path(path).read_text(encoding="utf-8")
    from etlens.analysis.memory import analyze_memory
    from etlens.views.memory_timeline import write_memory_html

    rep = analyze_memory(etlens.read(PTE))
    write_memory_html(rep, str(tmp_path / "m.html"))
    assert _srcdoc(mimebundle(rep)["text/html"]) == (tmp_path / "m.html").read_text(encoding="utf-8")


def test_report_result_shows_its_page(tmp_path):
    from etlens.report import report_from_artifacts

    res = report_from_artifacts(ETDP, str(tmp_path / "r.html"), etrecord=ETREC, debug_buffer=BUF, pte=PTE)
    text = repr(res)
    assert text.startswith("<etlens ReportResult 'r.html': latency ") and "\n" not in text
    b = res._repr_mimebundle_()
    assert b["text/plain"] == text and _srcdoc(b["text/html"]) == (tmp_path / "r.html").read_text(encoding="utf-8")


def test_texts_name_what_they_are():
    g = _make("graph")
    assert repr(g) == f"<etlens Graph 'forward': {len(g)} nodes, 1 delegate>"
    assert repr(_make("delegation")).startswith("<etlens DelegationInfo: 1 delegated subgraph(s) (XnnpackBackend)")
    assert mimebundle(_make("graphs"))["text/plain"] == "<etlens 2 graphs: exported_program, forward>"
    assert mimebundle(_make("artifact"))["text/plain"].startswith("<etlens etrecord artifact 'mlp_xnnpack.etrecord'")
    assert repr(_make("trace")) == "<etlens Trace 'mlp' · xnnpack: 2 snapshots, 0 passes>"
    assert repr(_make("compare")).startswith("<etlens CompareResult 'mlp_xnnpack.etdp' vs 'mlp_xnnpack.etdp': 0 "
                                             "regression(s), 0 improvement(s)")


def test_formatted_types_are_the_real_classes():
    import importlib

    for module, name in FORMATTED_TYPES:
        cls = getattr(importlib.import_module(module), name)
        assert (cls.__module__, cls.__name__) == (module, name)


def test_ipython_shell_gets_the_bundle_and_terminal_does_not():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    try:
        assert register_formatters(ip)
        data, _ = ip.display_formatter.format(_make("delegation"))
        assert "<iframe sandbox='allow-scripts'" in data["text/html"]
        assert data["text/plain"].startswith("<etlens DelegationInfo")

        class Terminal:  # a terminal IPython shows text only: nothing registered, nothing rendered
            class display_formatter:
                active_types = ["text/plain"]
                mimebundle_formatter = object()

        assert not register_formatters(Terminal())
    finally:
        InteractiveShell.clear_instance()


def test_import_etlens_in_a_kernel_registers_and_plain_python_imports_no_ipython():
    code = ("from IPython.core.interactiveshell import InteractiveShell\nip = InteractiveShell.instance()\n"
            "import etlens\ng = etlens.read(%r).graph()\ndata, _ = ip.display_formatter.format(g)\n"
            "print(sorted(data), data['text/plain'])" % PTE)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "['text/html', 'text/plain'] <etlens Graph 'forward': 4 nodes, 1 delegate>"
    code = "import sys, etlens; etlens.read(%r).graph(); print('IPython' in sys.modules)" % PTE
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "False"


def test_show_without_ipython_writes_a_temp_page():
    code = ("import sys, etlens\np = etlens.show(etlens.read(%r).graph(), overlay={'aten_linear_default': 1.5}, "
            "overlay_label='ms')\nprint(p)\nprint('IPython' in sys.modules)" % PTE)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    lines = out.strip().splitlines()
    assert lines[0].startswith("<etlens Graph 'forward'") and "wrote" in lines[0]
    path = lines[1]
    try:
        page = Path(path).read_text(encoding="utf-8")
        assert path.endswith(".html") and "Content-Security-Policy" in page and '"overlay"' in page
        assert lines[2] == "False"
    finally:
        os.unlink(path)


def test_show_in_a_kernel_displays(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.instance()
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    try:
        assert etlens.show(_make("graphs"), height=500) is None
        assert isinstance(shown[0], Display) and shown[0].height == 500
        assert "height:500px" in shown[0]._repr_mimebundle_()["text/html"]
    finally:
        InteractiveShell.clear_instance()


def test_show_refuses_what_it_cannot_show():
    with pytest.raises(EtlensError, match="no inline view for a object"):
        page_for(object())
    with pytest.raises(EtlensError, match="apply to a Graph"):
        page_for(_make("size"), overlay={})


def test_dataframe_page():
    df = _make("inspector").to_dataframe()
    page, height = page_for(df)
    assert page.count("<tr>") == len(df) + 1 and 120 <= height <= 600


#: the objects a plain `python -i` shell echoes, one line each (no IPython anywhere)
SHELL = """
import etlens
from etlens.analysis.memory import analyze_memory
from etlens.analysis.size import size_of_file
g = etlens.read(PTE).graph()
g
etlens.read(ETREC).graph(stage="exported_program")
etlens.get_delegation_info(ETREC)
analyze_memory(etlens.read(PTE))
size_of_file(PTE)
etlens.Inspector(etdump_path=ETDP, etrecord=ETREC, debug_buffer_path=BUF)
from etlens.model.trace import Trace, Snapshot
Trace("mlp", "xnnpack", [Snapshot("export", "export", 0, g)])
from etlens.fleet import Side, compare
compare(Side.of_etdumps([ETDP]), Side.of_etdumps([ETDP]))
from etlens.report import report_from_artifacts
import tempfile, os; d = tempfile.mkdtemp()
report_from_artifacts(ETDP, os.path.join(d, "r.html"), etrecord=ETREC, pte=PTE)
import sys; print("IPython" in sys.modules)
"""


def test_plain_python_shell_prints_one_line_each():
    setup = f"PTE, ETREC, ETDP, BUF = {PTE!r}, {ETREC!r}, {ETDP!r}, {BUF!r}\n"
    proc = subprocess.run([sys.executable, "-i", "-q"], input=setup + SHELL, capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONSTARTUP": "", "PYTHONWARNINGS": "ignore"}, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 10, proc.stdout + proc.stderr
    kinds = ["Graph 'forward'", "Graph 'exported_program'", "DelegationInfo", "MemoryReport", "SizeReport",
             "Inspector", "Trace 'mlp'", "CompareResult", "ReportResult 'r.html'"]
    for line, kind in zip(lines, kinds):
        assert line.startswith(f"<etlens {kind}") and line.endswith(">"), line
    assert lines[-1] == "False"
