"""``etlens memory PTE --measure``: the process's memory, stage by stage and by owner, beside the plan.

Real programs (``tests/memsize/build_measured.py``: a 4-layer 512-wide MLP lowered to XNNPACK and
to portable kernels, int8, a dynamic-length sequence model) are measured in a fresh runtime process
and checked against an independent measurement made here the plain way (a fresh ``python`` that
imports torch and the runtime, loads the program with ``_load_for_executorch``, runs it and reads
its ``VmHWM``), and the delegate's own allocation against the weights it packs and against the
anonymous memory a process holds with and without the delegate.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once

HERE = Path(__file__).resolve().parent

#: an independent measurement: load the program the usual way in a fresh process, run it, print VmHWM (the
#: peak) and RssAnon (the heap and other anonymous pages resident at the end: the delegate's packed weights are
#: there, file-backed pages are not; how many pages of a shared library a run maps depends on the page cache)
_INDEPENDENT = """
import sys, torch
from executorch.extension.pybindings.portable_lib import _load_for_executorch, _load_for_executorch_from_buffer
pte, mode, shape = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
buf = open(pte, "rb").read() if mode == "buffer" else None
m = _load_for_executorch(pte) if mode == "mmap" else _load_for_executorch_from_buffer(buf)
for _ in range(3):
    m.forward([torch.randn(shape)])
status = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("Vm") or
          l.startswith("Rss")}
print(status["VmHWM"], status["RssAnon"])
"""


@pytest.fixture(scope="module")
def progs() -> dict:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to lower and run programs")
    out = build_once("memsize-build_measured", HERE / "build_measured.py")
    manifest = json.loads((out / "manifest.json").read_text())
    return {"dir": out, **manifest}


def _measure_doc(pte: Path, tmp_path: Path, *extra: str) -> dict:
    from etlens.cli.main import main

    out = tmp_path / f"{pte.stem}-{len(list(tmp_path.iterdir()))}.json"
    assert main(["memory", str(pte), "--measure", "--format", "json", "-o", str(out), *extra]) == 0
    return json.loads(out.read_text())


def _measure(pte: Path, tmp_path: Path, *extra: str) -> dict:
    return _measure_doc(pte, tmp_path, *extra)["measured"]


@pytest.fixture(scope="module")
def xnn(progs, tmp_path_factory) -> dict:
    """``etlens memory mlp_xnnpack.pte --measure --format json``'s document (measured once for the module)."""
    return _measure_doc(progs["dir"] / progs["mlp_xnnpack"], tmp_path_factory.mktemp("xnn"))


def _independent(pte: Path, mode: str, shape: str) -> tuple[int, int]:
    """(peak resident bytes, anonymous resident bytes at the end) of a fresh process that loads and runs ``pte``."""
    proc = subprocess.run([sys.executable, "-c", _INDEPENDENT, str(pte), mode, shape], capture_output=True, text=True,
                          check=True)
    peak, anon = proc.stdout.strip().splitlines()[-1].split()
    return int(peak), int(anon)


def _sum(m: dict) -> int:
    return sum(o["bytes"] for o in m["owners"])


@pytest.mark.slow
def test_contract_and_delegate_packed_weights(progs, xnn):
    """XNNPACK fp32: the contract's fields; peak within 10% of an independent fresh-process measurement;
    owners add up to the peak; the delegate's init allocation is its packed copy of the weights."""
    width, layers = progs["width"], progs["layers"]
    pte = progs["dir"] / progs["mlp_xnnpack"]
    m = xnn["measured"]
    assert {"peak_rss_bytes", "stages", "owners", "plan_bytes"} <= set(m)
    assert [s["stage"] for s in m["stages"]] == ["start", "imports", "program load", "method load", "first run",
                                                 "steady runs"]
    for s in m["stages"]:
        assert {"stage", "rss_bytes", "heap_bytes"} <= set(s) and s["rss_bytes"] > 0 and s["heap_bytes"] > 0
    assert all({"owner", "bytes", "inferred"} <= set(o) and isinstance(o["inferred"], bool) for o in m["owners"])
    theirs, _ = _independent(pte, "mmap", f"1,{width}")
    assert abs(m["peak_rss_bytes"] - theirs) <= 0.10 * theirs, (m["peak_rss_bytes"], theirs)
    assert abs(_sum(m) - m["peak_rss_bytes"]) <= 0.10 * m["peak_rss_bytes"]
    weights = layers * (width * width + width) * 4
    delegate = [o for o in m["owners"] if o["owner"].startswith("delegate XnnpackBackend")]
    assert len(delegate) == 1 and not delegate[0]["inferred"]
    assert abs(delegate[0]["bytes"] - weights) <= 0.2 * weights, (delegate[0]["bytes"], weights)
    assert m["plan_bytes"] == sum(a["size"] for a in xnn["methods"][0]["arenas"])
    assert "XnnpackBackend" in m["largest"]["owner"]


@pytest.mark.slow
def test_report_section_and_page(progs, xnn, tmp_path):
    """The report's memory section shows plan vs measured from the sidecar ``<program>.measured.json``."""
    import shutil
    from types import SimpleNamespace

    from etlens.report.memory_section import memory_sections

    pte = tmp_path / "model.pte"
    shutil.copy(progs["dir"] / progs["mlp_xnnpack"], pte)
    (tmp_path / "model.measured.json").write_text(json.dumps(xnn))
    files: dict = {}
    notes: list = []
    sections = memory_sections(SimpleNamespace(pte=str(pte), etdump=None, etrecord=None), str(tmp_path), "r",
                               files, notes)
    by_id = {s.id: s for s in sections}
    assert not notes and "measured-memory" in by_id
    body = by_id["measured-memory"].body
    assert "planned (arenas)" in body and "delegate XnnpackBackend init" in body and "Largest owner" in body
    page = Path(files["planned memory"]).read_text()
    assert "Measured: the plan beside what the process used" in page


@pytest.mark.slow
def test_dynamic_shape_upper_bound(progs, tmp_path):
    """A dynamic-length model: the plan is reported as sized for the upper bound; at a quarter of the
    length the live tensors need less than the plan reserves, and the arena is allocated whole anyway."""
    pte = progs["dir"] / progs["dyn_portable"]
    max_len = progs["dyn_max_len"]
    width = progs["width"] // 2
    m = _measure(pte, tmp_path, "--shapes", f"1x{max_len // 4}x{width}")
    dyn = m["dynamic"]
    assert dyn["upper_bound_planning"] is True
    assert dyn["inputs"] == [{"input": 0, "upper_bound": [1, max_len, width], "run_shape": [1, max_len // 4, width]}]
    assert dyn["need_at_shape_bytes"] < dyn["live_peak_at_upper_bound_bytes"] <= m["plan_bytes"]
    arena = [o for o in m["owners"] if o["owner"] == "planned arena"]
    assert arena and arena[0]["bytes"] == m["plan_bytes"]
    mapped = [o for o in m["owners"] if "mapped" in o["owner"]]
    assert mapped and mapped[0]["bytes"] >= 0.9 * (pte.stat().st_size - 65536)


def test_owner_split_and_gate_without_runtime(tmp_path):
    """The owner split from fixed samples (no runtime): sums to the peak, names the largest owner; the gate trips."""
    from types import SimpleNamespace

    from etlens.analysis.memory_measured import measured_memory
    from etlens.cli.memory_measure import peak_gate
    from etlens.readers.pte import read
    from etlens.views.memory_measured import format_measured, measured_html

    art = read(str(Path(__file__).resolve().parents[1] / "data" / "mlp_xnnpack.pte"))
    mb = 1 << 20
    plan = art.program.execution_plan[0]
    a = sum(plan.non_const_buffer_sizes)
    raw = {"load": "buffer", "method": plan.name, "runs": 2, "input_bytes": 0, "stages": [
        {"stage": "start", "rss_bytes": 10 * mb, "peak_rss_bytes": 10 * mb, "heap_bytes": mb},
        {"stage": "imports", "rss_bytes": 300 * mb, "peak_rss_bytes": 320 * mb, "heap_bytes": 100 * mb},
        {"stage": "program load", "rss_bytes": 360 * mb, "peak_rss_bytes": 360 * mb, "heap_bytes": 160 * mb},
        {"stage": "method load", "rss_bytes": 400 * mb + a, "peak_rss_bytes": 420 * mb + a,
         "heap_bytes": 200 * mb + a},
        {"stage": "first run", "rss_bytes": 401 * mb, "peak_rss_bytes": 401 * mb, "heap_bytes": 200 * mb + a},
        {"stage": "steady runs", "rss_bytes": 401 * mb, "peak_rss_bytes": 401 * mb, "heap_bytes": 200 * mb + a}]}
    m = measured_memory(raw, art.program, file_size=60 * mb)
    assert m["peak_rss_bytes"] == 420 * mb + a and m["peak_stage"] == "method load"
    assert _sum(m) == m["peak_rss_bytes"]
    by = {o["owner"]: o for o in m["owners"]}
    assert by["program copied into memory (constants copied)"]["bytes"] == 60 * mb
    assert by["delegate XnnpackBackend init: its own buffers"]["bytes"] == 40 * mb
    assert by["transient during method load"]["inferred"] and by["transient during method load"]["bytes"] == 20 * mb
    assert m["largest"]["bytes"] == 60 * mb and "copied" in m["largest"]["reason"]
    assert m["delegate_init_bytes"] == 40 * mb
    assert "peak" in format_measured(m) and "<table" in measured_html(m)
    args = SimpleNamespace(pte="x.pte", fail_on_peak_bytes=400 * mb)  # over budget: exit 3
    assert peak_gate(args, m) == 3
    assert peak_gate(SimpleNamespace(pte="x.pte", fail_on_peak_bytes=500 * mb), m) is None


@pytest.mark.slow
def test_with_and_without_delegate_mapped_and_copied(progs, tmp_path):
    """The same weights on XNNPACK and on portable kernels, loaded mapped and copied, and int8.

    The delegate's init allocation is within 20% of the difference in anonymous memory with and without
    the delegate (copied load: both keep the file's bytes, only the packed copy and the portable program's
    own arena differ); a copied load
    owns the file's bytes as 'program copied', a mapped portable load the resident mapping; every
    peak is within 10% of the independent measurement and the owners add up to it.
    """
    width = progs["width"]
    d = progs["dir"]
    seen = {}
    for name in ("mlp_xnnpack", "mlp_portable", "mlp_int8"):
        for load in ("mmap", "buffer"):
            m = _measure(d / progs[name], tmp_path, "--load", load)
            theirs, anon = _independent(d / progs[name], load, f"1,{width}")
            assert abs(m["peak_rss_bytes"] - theirs) <= 0.10 * theirs, (name, load, m["peak_rss_bytes"], theirs)
            assert abs(_sum(m) - m["peak_rss_bytes"]) <= 0.10 * m["peak_rss_bytes"], (name, load)
            seen[name, load] = (m, anon)
    size = (d / progs["mlp_portable"]).stat().st_size
    copied = {o["owner"]: o["bytes"] for o in seen["mlp_portable", "buffer"][0]["owners"]}
    assert copied["program copied into memory (constants copied)"] == size
    mapped = {o["owner"]: o["bytes"] for o in seen["mlp_portable", "mmap"][0]["owners"]}
    assert mapped["program mapped from the file (constants mapped)"] >= 0.9 * size
    xnn = seen["mlp_xnnpack", "buffer"][0]
    portable = seen["mlp_portable", "buffer"][0]
    # the portable program has an arena of its own (a transposed weight for addmm) the delegated one does not
    # need: with it added back, the anonymous memory with and without the delegate differs by the delegate's
    # allocation (anonymous, not the peak: a run maps more or fewer pages of the runtime's shared library
    # depending on the page cache, a few MB either way, and that would drown a 4 MB allocation)
    with_without = (seen["mlp_xnnpack", "buffer"][1] - seen["mlp_portable", "buffer"][1]
                    + portable["plan_bytes"] - xnn["plan_bytes"])
    assert abs(xnn["delegate_init_bytes"] - with_without) <= 0.2 * abs(with_without), (xnn["delegate_init_bytes"],
                                                                                       with_without)
    int8 = seen["mlp_int8", "mmap"][0]
    assert 0 < int8["delegate_init_bytes"] < 0.5 * xnn["delegate_init_bytes"]


def test_fleet_column_from_sidecar(tmp_path):
    """A dump that comes with ``<dump>.measured.json`` gets the measured peak on every row; others get null."""
    import shutil

    from etlens.fleet.ingest import dump_rows

    data = Path(__file__).resolve().parents[1] / "data"
    with_it = tmp_path / "a.etdp"
    without = tmp_path / "b.etdp"
    shutil.copy(data / "mlp_xnnpack.etdp", with_it)
    shutil.copy(data / "mlp_xnnpack.etdp", without)
    (tmp_path / "a.measured.json").write_text(json.dumps({"measured": {"peak_rss_bytes": 123456789}}))
    rows = dump_rows(str(with_it))
    assert rows.num_rows > 0 and set(rows.column("peak_rss_bytes").to_pylist()) == {123456789}
    assert set(dump_rows(str(without)).column("peak_rss_bytes").to_pylist()) == {None}


@pytest.mark.slow
def test_external_constants_ptd(progs, tmp_path):
    """Constants in a ``.ptd`` beside the program: found and mapped (mmap) or still mapped under a buffer load."""
    pte = progs["dir"] / progs["ext/mlp_external"]
    ptd = next(pte.parent.glob("*.ptd"))
    for load in ("mmap", "buffer"):
        m = _measure(pte, tmp_path, "--load", load)
        by = {o["owner"]: o["bytes"] for o in m["owners"]}
        mapped = by.get("program mapped from the file (constants mapped)",
                        by.get("external constants mapped from the .ptd", 0))
        assert mapped >= 0.9 * ptd.stat().st_size, (load, by)
        assert abs(_sum(m) - m["peak_rss_bytes"]) <= 0.10 * m["peak_rss_bytes"]
