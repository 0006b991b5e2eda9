"""ETRecord programs that call lowered backend modules (graph-map entries recorded after lowering)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import requires_executorch
from etlens.readers._fx import target_name
from etlens.readers.etrecord import read

pytestmark = requires_executorch
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lowered_record(tmp_path_factory):
    """The partially delegated demo with its lowered edge program recorded as graph map ``lowered``."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from etlens.demos import get_demo

    model, inputs = get_demo("mixed")
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()], generate_etrecord=True)
    lowered_edge = edge.exported_program()
    et = edge.to_executorch()
    record = et.get_etrecord()
    record.graph_map = {"lowered/forward": lowered_edge}
    record.update_representative_inputs([inputs])
    path = tmp_path_factory.mktemp("etrecord") / "mixed_lowered.etrecord"
    record.save(str(path))
    return str(path), inputs


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
