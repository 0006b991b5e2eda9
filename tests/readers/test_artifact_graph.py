"""Artifact.graph(method=, stage=): one way to pick a graph, one error naming what exists."""

from __future__ import annotations

import pytest

from etlens.errors import MissingDataError
from etlens.model import Graph
from etlens.readers import read
from etlens.readers.base import Artifact


def _art() -> Artifact:
    return Artifact("test", "m.bin", {"exported_program": Graph("a"), "edge/forward": Graph("b"),
                                      "edge/backward": Graph("c")})


def test_pick_by_stage_method_and_default():
    art = _art()
    assert art.graph().name == "a"  # no "forward": the first
    assert art.graph(stage="edge/forward").name == "b"
    assert art.graph("backward").name == "c"  # the one key ending in /backward
    assert art.graph("forward", stage="edge").name == "b"
    assert art.graph(prefer=("edge",)).name == "b"
    assert art.graph_key(prefer=("nope", "backward")) == "edge/backward"


def test_errors_name_the_file_and_what_exists():
    art = _art()
    with pytest.raises(MissingDataError, match=r"m\.bin: no stage 'x'; available methods/stages: exported_program"):
        art.graph(stage="x")
    with pytest.raises(MissingDataError, match=r"no method 'x'.*pass method="):
        art.graph("x")
    with pytest.raises(MissingDataError, match="contains no graph"):
        Artifact("test").graph()


def test_real_files(committed):
    pte = read(committed["mlp_xnnpack"].pte)
    assert pte.graph() is pte.graphs()["forward"] or pte.graph().name == pte.graphs()["forward"].name
    rec = read(committed["mlp_xnnpack"].etrecord)
    assert rec.graph("forward").name == rec.graph(stage="edge_dialect_exported_program/forward").name
    assert rec.graph(stage="exported_program") is rec.graph("exported_program")
