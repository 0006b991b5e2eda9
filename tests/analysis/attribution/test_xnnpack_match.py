"""The XNNPACK plug-in on hand-made payload graphs: kinds, rewrites, fusions, inserted nodes, ambiguity."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from etlens.analysis.attribution import EventMatch, attributor_for, registered_backends
from etlens.backends import Backend, register
from etlens.backends.xnnpack.events import XnnpackAttributor, event_kind_matches, parse_event_name
from etlens.backends.xnnpack.payload import XnnNode, XnnpackGraph, XnnValue


def graph(*nodes: tuple[str, int], dtype: str = "float32") -> SimpleNamespace:
    """A chain of XNodes (type, debug handle), value i -> node i -> value i+1."""
    xs = [XnnNode("XNN" + t, (i,), (i + 1,), h) for i, (t, h) in enumerate(nodes)]
    g = XnnpackGraph(nodes=xs, values=[XnnValue(i, dtype) for i in range(len(nodes) + 1)])
    return SimpleNamespace(id="XnnpackBackend", decoded=g)


def match(events, *nodes, dtype="float32"):
    return XnnpackAttributor().match(events, graph(*nodes, dtype=dtype))


def test_parse_event_names():
    assert parse_event_name("Convolution (NHWC, F32) IGEMM #1") == ("Convolution", ("NHWC", "F32"), "IGEMM")
    assert parse_event_name("Fully Connected (NC, QS8, QC8W) GEMM #2") == ("Fully Connected", ("NC", "QS8", "QC8W"),
                                                                           "GEMM")
    assert parse_event_name("Invalid Unary Op #1") == ("Invalid Unary Op", (), "")
    assert parse_event_name("Static Reshape (NC) #3") == ("Static Reshape", ("NC",), "")


def test_kinds():
    assert event_kind_matches("Convolution", "XNNDepthwiseConv2d") == 0
    assert event_kind_matches("Static Reshape", "StaticReshape") == 0
    assert event_kind_matches("Transpose", "StaticTranspose") == 0
    assert event_kind_matches("Mean", "GlobalAvgPooling2d") == 0
    assert 0 < event_kind_matches("Fully Connected", "Conv2d") < 1      # 1x1 conv run as a GEMM
    assert event_kind_matches("Softmax", "Conv2d") == float("inf")


def test_one_to_one_and_rewrites():
    ms = match(["Convolution (NHWC, F32) IGEMM #1", "Fully Connected (NC, F32) GEMM #1", "Mean (ND) Reduce2 #1"],
               ("Conv2d", 1), ("Conv2d", 4), ("GlobalAvgPooling2d", 7))
    assert [m.handles for m in ms] == [(1,), (4,), (7,)]
    assert [m.quality for m in ms] == ["exact", "alias", "exact"]


def test_clamp_fused_into_producer_and_converts():
    ms = match(["Convert (NC) #1", "Convolution (NHWC, QC8) IGEMM #1", "Convert (NC) #2"],
               ("Convert", 1), ("Conv2d", 2), ("Clamp", 3), ("Convert", 4), dtype="qint8")
    assert [m.handles for m in ms] == [(1,), (2, 3), (4,)]
    assert ms[1].fused == ("xnnpack.Clamp#2",)


def test_inserted_transpose_is_charged_to_its_consumer():
    ms = match(["Transpose (ND, X32) #1", "Convolution (NHWC, F32) IGEMM #1"], ("StaticTranspose", 0), ("Conv2d", 5))
    assert ms[0].handles == (5,) and ms[0].quality == "inserted"
    assert ms[1].handles == (5,) and ms[1].quality == "exact"


def test_quantized_unary_lookup_table():
    ms = match(["Fully Connected (NC, QS8, QC8W) GEMM #1", "Invalid Unary Op #1", "Fully Connected (NC, QS8) GEMM #2"],
               ("FullyConnected", 1), ("Convert", 1), ("Gelu", 2), ("Convert", 3), ("FullyConnected", 4),
               dtype="qint8")
    assert [m.handles[0] for m in ms] == [1, 2, 4]
    assert ms[1].handles == (2, 3)


def test_one_node_several_operators():
    ms = match(["Copy (NC, X32) #1", "Copy (NC, X32) #2", "Add (ND) #1"], ("Concatenate2", 3), ("Add", 4))
    assert [m.handles for m in ms] == [(3,), (3,), (4,)]


def test_ambiguous_and_unattributed_are_said():
    # two adjacent ReLU-like clamps, one event: which one ran is not determined by kind or order
    ms = match(["Sigmoid (NC) #1"], ("Sigmoid", 1), ("Sigmoid", 2))
    assert ms[0].quality == "ambiguous" and "could also be" in ms[0].note
    # an event with no node at all stays unattributed, with a reason
    ms = XnnpackAttributor().match(["Softmax (NC, F32) #1"], None)
    assert ms == [EventMatch("Softmax (NC, F32) #1", note=ms[0].note)] and not ms[0].attributed
    assert ".pte" in ms[0].note


def test_registry_plugs_other_backends():
    class Fake:
        def match(self, names, delegate):
            return [EventMatch(n, handles=(9,), quality="exact") for n in names]

    assert "xnnpack" in registered_backends()
    assert isinstance(attributor_for("XnnpackBackend"), XnnpackAttributor)
    register(Backend("fakenpu", ids=("FakeNpuBackend",), hooks={"events": Fake()}))
    assert attributor_for("FakeNpuBackend").match(["a"], None)[0].handles == (9,)
    assert attributor_for("UnknownBackend") is None


@pytest.mark.parametrize("n", [300])
def test_alignment_scales(n):
    import time

    nodes = [("Conv2d", 2 * i + 1) if i % 2 else ("FullyConnected", 2 * i + 1) for i in range(n)]
    events = [("Convolution (NHWC, F32) IGEMM #%d" if i % 2 else "Fully Connected (NC, F32) GEMM #%d") % i
              for i in range(n)]
    # a guard against a blow-up (exponential alignment), in CPU seconds: a busy machine stretches wall time
    # (0.085 CPU-s measured as 0.55 s wall at load average 15 on 2 cores), not CPU time; 60x margin
    t = time.process_time()
    ms = match(events, *nodes)
    assert time.process_time() - t < 5
    assert [m.handles[0] for m in ms] == [h for _, h in nodes]
