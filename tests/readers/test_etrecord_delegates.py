"""ETRecord programs that call lowered backend modules (graph-map entries recorded after lowering)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import requires_executorch
from etlens.readers._fx import target_name
from etlens.readers.etrecord import read

pytestmark = requires_executorch
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    """One lowering of the partially delegated demo, shared by every test here.

    Returns the in-memory views taken before ``to_executorch`` (which rewrites the edge program in
    place), the ExecuTorch manager, and an ETRecord whose graph map ``lowered/forward`` holds the
    program with its delegate calls.
    """
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    from etlens.demos import get_demo
    from etlens.readers import read_object

    model, inputs = get_demo("mixed")
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()], generate_etrecord=True)
    lowered_edge = edge.exported_program()
    gm = lowered_edge.graph_module
    modules = {name: (mod.backend_id, len(mod.processed_bytes),
                      {target_name(n.target) for n in mod.original_module.graph.nodes if n.op == "call_function"})
               for name, mod in gm.named_children() if isinstance(mod, LoweredBackendModule)}
    edge_art = read_object(edge)
    gm_art = read_object(gm, name="forward")
    et = edge.to_executorch()
    et_art = read_object(et)
    record = et.get_etrecord()
    record.graph_map = {"lowered/forward": lowered_edge}
    record.update_representative_inputs([inputs])
    path = tmp_path_factory.mktemp("etrecord") / "mixed_lowered.etrecord"
    record.save(str(path))
    return SimpleNamespace(path=str(path), inputs=inputs, modules=modules, edge_art=edge_art, gm_art=gm_art,
                           et_art=et_art)


@pytest.fixture()
def lowered_record(lowered):
    return lowered.path, lowered.inputs


def test_edge_manager_delegates(lowered):
    """In-memory EdgeProgramManager / GraphModule / ExecutorchProgramManager: delegates folded."""
    art = lowered.edge_art
    assert art.format == "edge_program_manager" and list(art.graphs()) == ["forward"]
    g = art.graphs()["forward"].lint()
    delegates = g.delegates()
    assert len(delegates) == len(lowered.modules) == 2
    for i, node in enumerate(delegates):
        backend, size, ops = lowered.modules[node.attrs["lowered_module"]]
        assert node.kind == "delegate" and node.category == "delegate"
        assert node.target == "executorch_call_delegate"
        assert node.delegate.backend_id == backend == "XnnpackBackend"
        assert node.delegate.payload_size == size
        assert node.delegate.index == i
        assert {n.target for n in node.delegate.inner.ops()} == ops
        assert node.attrs["lowered_module"] not in g  # folded, not a node of its own
        assert all(src in g for src in node.inputs)
    assert "aten.cumsum.default" in g.counts_by_target()  # the op XNNPACK does not take
    g2 = lowered.gm_art.graphs()["forward"].lint()
    assert lowered.gm_art.format == "graph_module"
    assert [n.name for n in g2.delegates()] == [n.name for n in delegates]
    s = art.summary()
    assert [d["backend_id"] for d in s["delegates"]["forward"]] == ["XnnpackBackend", "XnnpackBackend"]
    et = lowered.et_art
    assert et.format == "executorch_program_manager"
    g3 = et.graphs()["forward"].lint()
    assert [n.delegate.backend_id for n in g3.delegates()] == ["XnnpackBackend", "XnnpackBackend"]


def test_delegates_in_graph_map_match_executorch(lowered_record):
    from executorch.devtools.etrecord import parse_etrecord
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    path, inputs = lowered_record
    ours = read(path)
    et = parse_etrecord(path)
    assert ours.stages == ["exported_program", "edge_dialect_exported_program/forward", "lowered/forward"]
    assert ours.graph_map_stages == list(et.graph_map) == ["lowered/forward"]
    graph = ours.graph("lowered/forward").lint()
    et_ep = et.graph_map["lowered/forward"]
    gm = et_ep.graph_module
    lowered = {n.name: getattr(gm, n.target) for n in et_ep.graph.nodes if n.op == "get_attr"}
    assert all(isinstance(m, LoweredBackendModule) for m in lowered.values()) and len(lowered) == 2
    # same nodes as ExecuTorch's program, lowered-module get_attrs folded into the delegate nodes
    want = {(n.name, target_name(n.target)) for n in et_ep.graph.nodes if n.op == "call_function"}
    assert {(n.name, n.target) for n in graph.ops()} == want
    delegates = graph.delegates()
    assert len(delegates) == 2
    for i, node in enumerate(delegates):
        mod = lowered[node.attrs["lowered_module"]]
        assert node.delegate.index == i
        assert node.delegate.backend_id == mod.backend_id == "XnnpackBackend"
        assert node.delegate.payload_size == len(mod.processed_bytes)
        inner_ops = {n.target for n in node.delegate.inner.ops()}
        assert inner_ops == {target_name(n.target) for n in mod.original_module.graph.nodes
                             if n.op == "call_function"}
        assert node.debug_handles  # the delegate call carries its handle(s)
    # the graph of ExecuTorch's own program (rebuilt via the fallback) is the same graph
    rebuilt = ours.graph("lowered/forward", rebuild=True).lint()
    assert [(n.name, n.kind, n.target, n.inputs) for n in rebuilt] == [(n.name, n.kind, n.target, n.inputs)
                                                                     for n in graph]
    assert [n.delegate.payload_size for n in rebuilt.delegates()] == [n.delegate.payload_size for n in delegates]
    # ...and it runs (ExecuTorch installed: its deserializer is the fallback for delegate calls)
    import torch

    got = ours.load_exported_program("lowered/forward").module()(*inputs)
    torch.testing.assert_close(got, ours.exported_program.module()(*inputs))


def test_delegates_without_executorch(lowered_record):
    path, _ = lowered_record
    script = textwrap.dedent(r"""
        import json, sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "executorch" or name.startswith("executorch."):
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, Block())
        from etlens.errors import MissingDataError
        from etlens.readers.etrecord import read
        rec = read(sys.argv[1])
        g = rec.graph("lowered/forward").lint()
        out = {"delegates": [[n.delegate.backend_id, n.delegate.payload_size, len(n.delegate.inner)]
                             for n in g.delegates()]}
        try:
            rec.load_exported_program("lowered/forward")
        except MissingDataError as exc:
            out["error"] = str(exc)
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", script, path], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [d[0] for d in out["delegates"]] == ["XnnpackBackend", "XnnpackBackend"]
    assert all(d[1] > 0 and d[2] > 0 for d in out["delegates"])
    assert "lowered/forward" in out["error"] and "executorch_call_delegate" in out["error"]
    assert "pip install etlens[executorch]" in out["error"]
