"""The demo CNN traced for XNNPACK: one snapshot per pass, diffs, handles, lineage, file validity."""

from __future__ import annotations

import json


from .conftest import requires_executorch

pytestmark = requires_executorch


def test_one_snapshot_per_xnnpack_pass(cnn_xnnpack):
    import torch
    from executorch.backends.xnnpack._passes import XNNPACKPassManager

    trace, _ = cnn_xnnpack
    # ExecuTorch's own list, read independently of etlens
    expected = [p.__name__ for p in XNNPACKPassManager(torch.export.export(torch.nn.ReLU(), (torch.randn(2),))).passes]
    assert trace.pass_names() == expected
    stages = [s.stage for s in trace.snapshots]
    assert stages == ["export", "to_edge"] + ["pass"] * len(expected) + ["lower"]
    assert [s.index for s in trace.snapshots] == list(range(len(trace.snapshots)))
    assert trace.failed is None
    for prev, cur in zip(trace.snapshots, trace.snapshots[1:], strict=False):
        assert cur.nodes_delta == len(cur.graph) - len(prev.graph)
        assert cur.wall_time_s > 0


def test_known_rewrites_show_in_diffs(cnn_xnnpack):
    trace, _ = cnn_xnnpack
    # ConvertToLinearPass folds permute_copy + addmm into one linear
    s = trace["ConvertToLinearPass"]
    added = [s.graph[n] for n in s.diff["added"]]
    assert [n.target for n in added] == ["aten.linear.default"]
    removed_targets = {trace.snapshots[s.index - 1].graph[n].target for n in s.diff["removed"]}
    assert removed_targets == {"aten.addmm.default", "aten.permute_copy.default"}
    # FuseActivationPass removes the ReLU6 (hardtanh) nodes into their producers
    f = trace["FuseActivationPass"]
    assert f.nodes_delta < 0
    assert all(trace.snapshots[f.index - 1].graph[n].target == "aten.hardtanh.default" for n in f.diff["removed"])
    # lowering: everything XNNPACK takes ends up inside one delegate
    low = trace["lower"]
    assert len(low.graph.delegates()) == 1
    assert low.diff["delegated"]
    assert not trace["XNNPACKRemoveCloneOpsTransform"].diff["added"]


def test_decomposition_nodes_carry_parent_handle(cnn_xnnpack):
    """to_edge decomposes batch_norm into _native_batch_norm_legit_no_training + getitem: one handle."""
    trace, _ = cnn_xnnpack
    export, edge = trace["export"].graph, trace["to_edge"].graph
    bn = next(n for n in export if n.target == "aten.batch_norm.default")
    children = [n for n in edge if n.kind == "op" and n.lineage_root == bn.name]
    assert {n.target for n in children} == {"aten._native_batch_norm_legit_no_training.default", "getitem"}
    handles = {n.debug_handles for n in children}
    assert len(handles) == 1 and len(next(iter(handles))) == 1
    # new in this snapshot (not present before), and the export node got the same handle back-annotated
    diff = trace["to_edge"].diff
    assert all(n.name in diff["added"] or n.name in diff["rewritten"] for n in children)
    assert diff["origin"][children[0].name] == bn.name
    assert bn.debug_handles == next(iter(handles))


def test_handles_match_executorch_numbering(cnn_xnnpack):
    trace, _ = cnn_xnnpack
    edge = trace["to_edge"].graph
    ops = [n for n in edge if n.kind == "op"]
    assert all(len(n.debug_handles) == 1 for n in ops)
    # ExecuTorch numbers from 1 without gaps, in graph order of first appearance
    firsts = []
    for n in ops:
        if n.debug_handles[0] not in firsts:
            firsts.append(n.debug_handles[0])
    assert firsts == list(range(1, len(firsts) + 1))


def test_convert_to_linear_drops_handle_and_validator_reports_it(cnn_xnnpack):
    """A real finding: ExecuTorch's ConvertToLinearPass builds linear without from_node/debug_handle."""
    trace, _ = cnn_xnnpack
    s = trace["ConvertToLinearPass"]
    prev = trace.snapshots[s.index - 1].graph
    lost = s.handle_report["lost"]
    assert [x["node"] for x in lost] == ["aten_linear_default"]
    addmm = next(n for n in prev if n.target == "aten.addmm.default")
    assert lost[0]["pass"] == "ConvertToLinearPass"
    assert addmm.name in lost[0]["from"]
    assert tuple(lost[0]["handles"]) == addmm.debug_handles
    # propagated in the snapshot so later passes and the viewer can follow the node
    assert s.graph["aten_linear_default"].debug_handles == addmm.debug_handles
    # later passes carry the gap but do not blame themselves
    assert not trace["PropagateCustomMetaPass"].handle_report["lost"]


def test_lineage_reaches_export_node_and_source_line(cnn_xnnpack):
    trace, _ = cnn_xnnpack
    last_pass = trace.snapshots[-2]
    conv = next(n for n in last_pass.graph if n.target == "aten.convolution.default")
    hops = trace.lineage(conv.name, last_pass.index)
    assert hops[0].snapshot == last_pass.name and hops[-1].snapshot == "export"
    assert hops[-1].target == "aten.conv2d.default"
    assert "demos.py" in hops[-1].source_line
    assert hops[-1].debug_handles == conv.debug_handles
    # the fused linear goes back to the export linear through the inferred handle
    lin = trace.lineage("aten_linear_default", "ConvertToLinearPass")
    assert lin[-1].snapshot == "export" and lin[-1].target == "aten.linear.default"


def test_file_is_valid_and_readable(cnn_xnnpack):
    from etlens.readers import read

    trace, path = cnn_xnnpack
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    assert data["schema"] == "etlens.trace" and data["version"] == 1
    assert data["backend"] == "xnnpack" and data["model"] == "cnn"
    assert data["created_by"].startswith("etlens ")
    snap = data["snapshots"][3]
    assert set(snap) >= {"name", "stage", "index", "wall_time_s", "graph", "diff", "nodes_delta", "error",
                         "handle_report"}
    art = read(path)
    assert art.format == "trace"
    assert list(art.graphs()) == [s.name for s in trace.snapshots]
    summary = art.summary()
    assert summary["snapshots"] == len(trace.snapshots) and summary["failed"] is None
    assert art.trace.to_json() == trace.to_json()

