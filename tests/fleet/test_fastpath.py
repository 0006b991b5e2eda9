"""The collect fast path writes exactly the rows of the Inspector-based reference path.

Real dumps (the session fixtures: portable, XNNPACK-delegated, quantized, multi-method, with debug
events; the fleet's dumps with and without them) and hand-built many-run dumps (renamed kernels,
duplicate events, wrap-around, allocations, empty runs) go through both
:func:`etlens.fleet.ingest.reference_rows` and :func:`etlens.fleet.ingest.dump_rows`, with and
without the ETRecord; the tables must be equal column by column, value by value.
"""

from __future__ import annotations

import random
import warnings
from collections import defaultdict

import pytest

from etlens.fleet.fastpath import clear_caches, fast_rows
from etlens.fleet.ingest import dump_rows, record_at, reference_rows
from tests.conftest import HAS_EXECUTORCH
from tests.readers.etdump_synth import many_runs

META = {"device": "pixel7", "build": None, "lab": "x"}


def _values(table) -> dict:
    """The table's values by column (dictionary layout and chunking aside: what readers see)."""
    return {"schema": table.schema, **{c: table[c].to_pylist() for c in table.column_names}}


def _assert_same(path, record_path=None, data=None):
    record = record_at(record_path) if record_path else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = reference_rows(path, record, META, ["lab"], data=data)
    clear_caches()
    for _ in range(2):          # cold caches, then warm (the static columns reused)
        got = fast_rows(path, record, META, ["lab"], data=data)
        assert got is not None and got.schema == want.schema
        for name in want.column_names:
            assert got[name].to_pylist() == want[name].to_pylist(), (path, record_path, name)
    return want.num_rows


def test_fixture_dumps(artifacts, committed):
    cases = list(artifacts.values()) + list(committed.values())
    n = 0
    for a in cases:
        if not getattr(a, "etdump", None):
            continue
        n += _assert_same(a.etdump) + _assert_same(a.etdump, a.etrecord)
    assert n > 300


def test_multi_method_dump():
    from tests.conftest import ROOT

    d = ROOT / "tests" / "analysis" / "inspector" / "data"
    assert _assert_same(str(d / "mm.etdp"), str(d / "mm.etrecord")) > 0


def test_fleet_dumps(fleet):
    for d in fleet["dumps"]:
        _assert_same(d["etdump"], d["etrecord"])


@pytest.mark.parametrize("debug", [False, True])
def test_many_runs(tmp_path, debug):
    data = many_runs(debug=debug)
    path = tmp_path / "farm.etdp"
    path.write_bytes(data)
    assert _assert_same(str(path)) == 5135
    assert _assert_same(str(path), data=data) == 5135        # bytes (Spark's binaryFiles) name the same file
    other = tmp_path / "other.etdp"
    other.write_bytes(many_runs(seed=5, debug=debug))        # same structure, other ticks: the cached structure
    clear_caches()
    a, b = dump_rows(str(path)), dump_rows(str(other))
    assert a["event_name"].to_pylist() == b["event_name"].to_pylist()
    assert a["duration_ms"].to_pylist() != b["duration_ms"].to_pylist()
    assert _values(b) == _values(dump_rows(str(other), fast=False))    # the reference path, LLM columns added alike


@pytest.mark.skipif(not HAS_EXECUTORCH, reason="needs the executorch extra (the reference Inspector)")
def test_many_runs_equal_executorch_inspector(tmp_path):
    from executorch.devtools import Inspector

    path = tmp_path / "farm.etdp"
    path.write_bytes(many_runs(allocations=False))     # ExecuTorch refuses allocation events
    theirs = defaultdict(list)
    for block in Inspector(etdump_path=str(path)).event_blocks:
        for e in block.events:
            if e.perf_data is not None:
                theirs[(block.name, e.name)] += list(e.perf_data.raw)
    ours = defaultdict(list)
    t = dump_rows(str(path))
    for key, ms in zip(zip(t["block"].to_pylist(), t["event_name"].to_pylist()), t["duration_ms"].to_pylist()):
        ours[key].append(ms)
    assert {k: sorted(v) for k, v in ours.items()} == {k: sorted(v) for k, v in theirs.items()}


def test_corrupt_dumps_fall_back_to_the_reference(tmp_path):
    data = many_runs(runs=5, ops=8)
    rng = random.Random(3)
    path = tmp_path / "bad.etdp"
    agreed = 0
    for _ in range(120):
        bad = bytearray(data)
        bad[rng.randrange(8, len(bad))] = rng.randrange(256)
        path.write_bytes(bytes(bad))
        try:
            want = dump_rows(str(path), fast=False)     # the reference path (+ the LLM columns, as collect adds)
        except Exception as exc:  # noqa: BLE001 - the reference's verdict on the file
            want = type(exc)
        try:
            got = dump_rows(str(path))
        except Exception as exc:  # noqa: BLE001
            got = type(exc)
        if isinstance(want, type) or isinstance(got, type):
            assert want == got
        else:
            agreed += _values(want) == _values(got)
    assert agreed > 0


def test_cached_structures_are_keyed_on_name_bytes(tmp_path):
    from tests.readers.etdump_synth import build

    def dump(name: str) -> bytes:
        return build([{"name": "Execute", "events": [{"name": name, "instr": 0, "start": 1, "end": 5 + r}]}
                      for r in range(3)])

    clear_caches()
    for i, name in enumerate(["x" * 2000, "y" * 2000, "native_call_a.out", "native_call_b.out"]):  # long: interned
        path = tmp_path / f"{i}.etdp"
        path.write_bytes(dump(name))
        got = dump_rows(str(path))
        assert set(got["event_name"].to_pylist()) == {name}
        assert _values(got) == _values(dump_rows(str(path), fast=False))
