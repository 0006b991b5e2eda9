"""The Inspector pauses Python's cyclic collector while it builds long-lived objects, and always
gives the collector back as it found it (see ``etlens.analysis.gcpause``)."""

from __future__ import annotations

import gc
import os

import pytest

import etlens
from etlens.analysis.inspector import core

pytestmark = pytest.mark.filterwarnings("ignore:Output Buffer not found")

DATA = os.path.join(os.path.dirname(__file__), "data")


def _inspector():
    return etlens.Inspector(etdump_path=os.path.join(DATA, "mm.etdp"), etrecord=os.path.join(DATA, "mm.etrecord"))


@pytest.mark.parametrize("enabled", [True, False])
def test_dataframe_is_built_with_the_collector_paused_and_restored(monkeypatch, enabled):
    seen = []
    real = core.build_frame

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(core, "build_frame", spy)
    insp = _inspector()
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        df = insp.to_dataframe()
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    assert seen == [False] and len(df) > 0


def test_the_collector_comes_back_when_the_dataframe_fails(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(core, "build_frame", broken)
    insp = _inspector()
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="boom"):
        insp.to_dataframe()
    assert gc.isenabled()
