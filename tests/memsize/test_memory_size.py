"""``etlens memory`` and ``etlens size`` against ExecuTorch's own deserializer, on fixtures and real models."""

from __future__ import annotations

import json

import pytest

from tests.conftest import requires_executorch

from etlens.analysis.memory import analyze_memory, attach_etrecord
from etlens.analysis.size import analyze_size
from etlens.cli.main import main
from etlens.readers.pte import read, read_pte_bytes


def _reference_sizes(data: bytes) -> list[list[int]]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(data).program
    return [list(p.non_const_buffer_sizes) for p in prog.execution_plan]


def _check_memory(data: bytes, name: str) -> None:
    rep = analyze_memory(read_pte_bytes(data, name))
    ref = _reference_sizes(data)
    assert [list(m.non_const_buffer_sizes) for m in rep.methods] == ref
    for m, sizes in zip(rep.methods, ref, strict=True):
        assert {a.id: a.size for a in m.arenas} == {i: s for i, s in enumerate(sizes) if i >= 1}
        for a in m.arenas:
            assert a.used_extent <= a.size, (name, a.id)
            assert 0 <= a.peak_live <= a.size
            assert a.waste == a.size - a.peak_live
            assert len(a.live_bytes) == len(m.instructions)
        for t in m.tensors:
            assert t.offset + t.size <= sizes[t.arena]
            assert t.first <= t.last
        # ExecuTorch's planner is correct on these programs: no conflicting overlap
        assert not [o for o in m.overlaps if o.kind == "conflict"], (name, m.overlaps)


def _check_size(data: bytes, name: str) -> None:
    rep = analyze_size(data, name)
    assert rep.total_bytes == len(data)
    assert sum(p.bytes for p in rep.parts) == len(data), name
    assert all(p.bytes > 0 for p in rep.parts)


def test_fixtures_memory_and_size(artifacts):
    for case in artifacts.values():
        data = open(case.pte, "rb").read()
        _check_memory(data, case.pte)
        _check_size(data, case.pte)


#: corpus builds (tests/corpus, ``architecture:config``) checked here; they are read, not lowered again: each test
#: shares its case's ``xdist_group`` with tests/corpus/test_corpus.py. The first tier's two are the corpus' own
#: first-tier builds (an int8 CNN in XNNPACK, a decoder on portable kernels); the rest run with the heavy corpus
CORPUS_FAST = ("resnet:int8-xnnpack", "gpt2:fp32-portable")
CORPUS_HEAVY = ("resnet:fp32-xnnpack", "vit:fp32-xnnpack", "vit:int8-xnnpack", "convnext:fp32-xnnpack",
                "bert:int8-xnnpack")


@requires_executorch
@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.replace(":", "-"),
                 marks=[pytest.mark.xdist_group(c)] + ([] if c in CORPUS_FAST else [pytest.mark.corpus]))
    for c in CORPUS_FAST + CORPUS_HEAVY])
def test_corpus_memory_and_size(case):
    from tests.corpus.conftest import build_case

    pytest.importorskip("transformers")
    built = build_case(*case.split(":"))
    assert built.result.get("ok"), built.result.get("error")
    data = open(built.pte, "rb").read()
    _check_memory(data, built.pte)
    _check_size(data, built.pte)
    kinds = {p.kind for p in analyze_size(data, built.pte).parts}
    assert {"header", "program", "padding"} <= kinds, kinds
    # a delegated program carries its XNNPACK payload; a portable one has none
    assert ("delegate" in kinds) == case.endswith("-xnnpack"), kinds


@requires_executorch
def test_elided_static_view_is_an_alias_not_a_conflict():
    """ExecuTorch emits no instruction for a static, memory-planned view (``input_ids.view(-1, n)`` before an
    embedding, as GPT-2 does): the view is a value of its own on its base's bytes that nothing writes. That is
    an alias; a planner bug (the same bytes written twice while both are live) stays a conflict."""
    import torch

    from etlens.builder.pipeline import lower

    class ViewThenEmbed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(32, 8)

        def forward(self, ids):
            return self.emb(ids.view(-1, ids.shape[-1])) * 2.0

    _, _, et = lower(ViewThenEmbed().eval(), (torch.arange(16).reshape(1, 16),), backend="portable")
    m = analyze_memory(read_pte_bytes(et.buffer, "view.pte")).methods[0]
    aliases = [o for o in m.overlaps if o.kind == "alias"]
    assert aliases and not [o for o in m.overlaps if o.kind == "conflict"], m.overlaps
    assert "written by no instruction" in aliases[0].reason
    ids = {aliases[0].a, aliases[0].b}
    assert {t.value for t in m.tensors if t.role == "input"} & ids  # one side is the program's input


def test_memory_lifetimes_and_peak_by_hand(artifacts):
    """mlp_portable: permute → addmm → relu → permute → addmm → add; check liveness at the peak by hand."""
    rep = analyze_memory(read(artifacts["mlp_portable"].pte))
    m = rep.methods[0]
    a = m.arenas[0]
    live_at = {t.value for t in m.tensors if t.first <= a.peak_at <= t.last}
    assert set(a.live_at_peak) == live_at
    # recompute the live bytes at every instruction independently (sum: no aliases in this program)
    for i, b in enumerate(a.live_bytes):
        assert b == sum(t.size for t in m.tensors if t.first <= i <= t.last)
    # the method input is live from instruction 0, the output until the end
    ins = {t.value: t for t in m.tensors}
    plan = read(artifacts["mlp_portable"].pte).program.execution_plan[0]
    assert ins[plan.inputs[0]].first == 0
    assert ins[plan.outputs[0]].last == len(m.instructions) - 1


def test_memory_etrecord_names_nodes(artifacts):
    case = artifacts["transformer_portable"]
    from etlens.readers.etrecord import read as read_etrecord

    rep = analyze_memory(read(case.pte))
    assert attach_etrecord(rep, read_etrecord(case.etrecord)) > 10
    named = [t for t in rep.methods[0].tensors if t.node]
    assert any(t.module and t.module.startswith("attn") for t in named)
    # the node's op matches the instruction that first uses the tensor
    for t in named:
        base = t.producer.split("::")[-1].split(".")[0]
        if base in ("permute_copy", "addmm", "gelu"):
            assert base in t.node, (t.producer, t.node)


def test_overlap_conflict_detected(artifacts):
    """Move one tensor onto another live one: the analysis must report a conflict (a planner bug)."""
    art = read(artifacts["mlp_portable"].pte)
    plan = art.program.execution_plan[0]
    rep = analyze_memory(art)
    m = rep.methods[0]
    at_peak = [t for t in m.tensors if t.value in m.arenas[0].live_at_peak]
    a, b = at_peak[0], at_peak[1]
    plan.values[b.value].val.allocation.memory_offset = a.offset
    conflicts = [o for o in analyze_memory(art).methods[0].overlaps if o.kind == "conflict"]
    assert {(o.a, o.b) for o in conflicts} & {(a.value, b.value), (b.value, a.value)}


def test_cli_memory_and_size_json_html(artifacts, tmp_path, browser):
    case = artifacts["cnn_q8_xnnpack"]
    out, html = tmp_path / "m.json", tmp_path / "m.html"
    assert main(["memory", case.pte, "--etrecord", case.etrecord, "--format", "json", "-o", str(out),
                 "--html", str(html)]) == 0
    doc = json.loads(out.read_text())
    m = doc["methods"][0]
    assert {"name", "arenas", "tensors"} <= set(m)
    assert {"id", "size", "peak_live"} <= set(m["arenas"][0])
    assert {"value", "arena", "offset", "size", "first", "last", "node"} <= set(m["tensors"][0])
    sout, shtml = tmp_path / "s.json", tmp_path / "s.html"
    assert main(["size", case.pte, "--format", "json", "-o", str(sout), "--html", str(shtml)]) == 0
    sdoc = json.loads(sout.read_text())
    assert sum(p["bytes"] for p in sdoc["parts"]) == sdoc["total_bytes"] == len(open(case.pte, "rb").read())
    assert all({"name", "bytes", "kind"} <= set(p) for p in sdoc["parts"])
    page = browser.new_page()
    page.goto(html.as_uri())
    bars = page.locator("rect.t")
    assert bars.count() == len(m["tensors"])
    bars.first.hover()
    assert "value" in page.locator(".etl-tip").inner_text()
    page.goto(shtml.as_uri())
    assert page.locator("rect.leaf").count() == len(sdoc["parts"])
    page.close()


def test_size_names_xnnpack_constants_and_tables(artifacts):
    rep = analyze_size(open(artifacts["cnn_q8_xnnpack"].pte, "rb").read(), "cnn_q8")
    names = [p.name for p in rep.parts]
    assert any("XNNConv2d" in n for n in names)
    assert any(n.startswith("FlatBuffer plan forward: values") for n in names)
    assert any(p.kind == "header" and "eh00" in p.name for p in rep.parts)


@pytest.mark.parametrize("cut", [7, 40, 300, -16])
def test_size_truncated_is_one_error(artifacts, cut):
    from etlens.errors import EtlensError

    data = open(artifacts["mlp_xnnpack"].pte, "rb").read()
    with pytest.raises(EtlensError):
        analyze_size(data[:cut], "cut.pte")


def test_torch_free_reading_and_analysis():
    """.bpte reading, memory, size and program diff never import torch or executorch."""
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT

    code = ("import sys\nfrom etlens.readers import read\nfrom etlens.analysis.size import size_of_file\n"
            "from etlens.analysis.memory import analyze_memory\n"
            "from etlens.analysis.program_diff import diff_programs\n"
            f"a = read({str(DATA / 'bundled_small.bpte')!r}); a.summary()\n"
            f"[v.array() for s in a.suites for c in s.cases for v in c.inputs + c.expected_outputs]\n"
            f"p = {str(DATA / 'mlp_xnnpack.pte')!r}; size_of_file(p); analyze_memory(read(p))\n"
            f"diff_programs(p, {str(DATA / 'mlp_portable.pte')!r})\n"
            "assert 'torch' not in sys.modules and 'executorch' not in sys.modules, 'heavy import'\n")
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
