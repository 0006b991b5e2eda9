"""The compare verdicts on seeded simulations of quiet, busy and loaded machines (tests/fleet/simulate.py).

The truth is known (which op changed, by how much) and every number is drawn from a fixed seed, so every
assertion here is deterministic: it does not depend on how busy the machine running the tests is. Each
scenario runs :data:`SEEDS` independent comparisons (5 processes a side, 8 runs each, the CI shape) with the
default thresholds, through the public ``compare`` on a fleet dataset, and checks what docs/fleet.md promises:
a planted 1.3x is found, the same build gives no false regression, swapped sides report improvements, a
changed block does not drag its neighbours, and q values are never below their p values.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from etlens.fleet import Side, compare

from .simulate import BUSY, LOADED, QUIET, Machine, op_names, write_dataset

SEEDS = 10
HEAD_ADDMM = QUIET.ops - 1     # the head layer's addmm (last op)


def _index(m: Machine, event: str, module: str) -> int:
    return next(i for i, (e, mod, _) in enumerate(op_names(m.layers)) if (e, mod) == (event, module))


def _run(tmp_path, m: Machine, effects: dict[int, float] | None = None, seeds=range(SEEDS), swap=False, **kw):
    """``[(sim, compare result)]`` per seed; ``swap`` compares B to A (the planted side first)."""
    out = []
    for seed in seeds:
        ds = str(tmp_path / f"ds-{seed}")
        sim = write_dataset(ds, m, seed, effects)
        a, b = (Side.of_dataset(ds, f"role = '{r}'") for r in (("B", "A") if swap else ("A", "B")))
        out.append((sim, compare(a, b, **kw)))
    return out


def _calls(res, verdict=("regression", "improvement")) -> list:
    out = [(r["event_name"], r["module_path"]) for r in res["rows"] if r["verdict"] in verdict]
    out += [("module", r["module_path"]) for r in res["modules"] if r["verdict"] in verdict]
    return out + (["model"] if res["summary"]["model_latency"]["verdict"] in verdict else [])


def _row(res, i: int, m: Machine) -> dict:
    e, mod, h = op_names(m.layers)[i]
    return next(r for r in res["rows"] if (r["event_name"], r["module_path"], r["debug_handles"]) == (e, mod, h))


@pytest.mark.parametrize("machine", [QUIET, BUSY, LOADED], ids=["quiet", "busy", "loaded"])
def test_same_build_no_false_call(tmp_path, machine):
    """No effect planted: no op, module or whole-model verdict other than ``same``, on any seed."""
    for seed, (_sim, res) in enumerate(_run(tmp_path, machine)):
        assert _calls(res) == [], (seed, [(r["event_name"], r["module_path"], r["unit_ratio"], r["floor"],
                                           r["p_value"]) for r in res["rows"] if r["verdict"] != "same"])
        assert res["summary"]["unit"] == "file"


@pytest.mark.parametrize("machine,least", [(QUIET, SEEDS), (BUSY, SEEDS - 1), (LOADED, SEEDS - 1)],
                         ids=["quiet", "busy", "loaded"])
def test_planted_1_3x_found_and_nothing_else(tmp_path, machine, least):
    """The head addmm 1.3x slower in every process of B: found on every seed of a quiet machine, on all but one
    of a busy and a loaded one (5 processes of 8 runs a side: where preemption hit half the runs of a process,
    its median strayed, the op's own spread puts its floor above 1.3x, and the row says so), with its q value
    under the FDR; nothing outside the head layer is ever called."""
    found = 0
    for seed, (_sim, res) in enumerate(_run(tmp_path, machine, {HEAD_ADDMM: 1.3})):
        row = _row(res, HEAD_ADDMM, machine)
        if row["verdict"] == "regression":
            found += 1
            assert 1.15 < row["unit_ratio"] < 1.5, (seed, row)
            assert row["floor"] < row["unit_ratio"] and row["p_value"] < 0.01 and row["q_value"] < 0.05
        else:   # not called: the row says why (its floor or its evidence)
            assert row["verdict"] == "same" and (row["floor"] >= row["unit_ratio"] or row["q_value"] >= 0.05
                                                 or row["p_value"] >= 0.01), row
        assert {m for _, m in (c for c in _calls(res) if c != "model")} <= {"head"}, (seed, _calls(res))
        assert not _calls(res, ("improvement",))
    assert found >= least, found


#: B's processes ran next to a CPU hog (3 of 5, each 1.5x slower typical op, every op by its own loading); A's not
ONE_SIDED = replace(BUSY, hog=3, hog_slow=0.4, hog_roles=("B",))


def _op_calls(res) -> list:
    return [c for c in _calls(res) if c != "model" and c[0] != "module"]


def test_hog_on_one_side_only_is_taken_off(tmp_path):
    """Same build, B's processes hogged (:data:`ONE_SIDED`): no op is called (the shared-state fit takes B's
    slower state off every op); planted 1.3x: found on 8 of 10 seeds (the others' floors say why), no other op
    called. Module rows: see below."""
    m = ONE_SIDED
    for seed, (_sim, res) in enumerate(_run(tmp_path, m)):
        assert not _op_calls(res), (seed, _calls(res))
        assert res["summary"]["state_shift"] > 1.1   # B drew the slow processes: the fit saw it
    found = 0
    for seed, (_sim, res) in enumerate(_run(tmp_path / "p", m, {HEAD_ADDMM: 1.3})):
        found += _row(res, HEAD_ADDMM, m)["verdict"] == "regression"
        assert {c[1] for c in _op_calls(res)} <= {"head"}, (seed, _calls(res))
    assert found >= SEEDS - 2, found


@pytest.mark.xfail(strict=True, reason="known: a module row (the per-run sum of its ops) is judged with its own "
                   "loading fitted on its process medians; with one side's processes hogged and preemption spikes, "
                   "that fit can go wild and a same-build module is called (seeds 0 and 4: l1 x1.25, l2 x3.4)")
def test_hog_on_one_side_modules(tmp_path):
    """Same build, :data:`ONE_SIDED`: no module row called either (fails today, deterministically; strict xfail
    so that the fix shows)."""
    for seed, (_sim, res) in enumerate(_run(tmp_path, ONE_SIDED, seeds=(0, 4))):
        assert not [c for c in _calls(res) if c[0] == "module"], (seed, _calls(res))


def test_swapped_sides_report_improvements(tmp_path):
    """The planted side first: the 1.3x is an improvement (same evidence), nothing is a regression."""
    found = 0
    for seed, (_sim, res) in enumerate(_run(tmp_path, LOADED, {HEAD_ADDMM: 1.3}, swap=True)):
        row = _row(res, HEAD_ADDMM, LOADED)
        assert 1 / 1.5 < row["unit_ratio"] < 1 / 1.15, row
        found += row["verdict"] == "improvement"
        assert not _calls(res, ("regression",)), (seed, _calls(res))
    assert found >= SEEDS - 1


def test_widened_block_does_not_drag_its_neighbours(tmp_path):
    """A block 8-40x slower (every op of layer l1, as the fleet's widened layer) and a neighbour really 1.3x
    slower (l3's addmm): all of l1 and the neighbour are found; the other ops stay ``same`` (the changed ops
    neither enter the drift floor nor the shared-state fit); swapped, all of them are improvements."""
    m = LOADED
    l1 = [i for i, (_, mod, _) in enumerate(op_names(m.layers)) if mod == "l1"]
    nb = _index(m, "native_call_addmm.out", "l3")
    effects = {i: f for i, f in zip(l1, (8.0, 40.0, 12.0))} | {nb: 1.3}
    for swap, verdict in ((False, "regression"), (True, "improvement")):
        found_nb = 0
        for seed, (_sim, res) in enumerate(_run(tmp_path / str(swap), m, effects, swap=swap)):
            calls = [c for c in _calls(res) if c != "model" and c[0] != "module"]
            assert {c for c in calls if c[1] == "l1"} == {(op_names(m.layers)[i][0], "l1") for i in l1}, (seed, calls)
            assert set(calls) <= {(op_names(m.layers)[i][0], "l1") for i in l1} | {("native_call_addmm.out", "l3")}
            assert ("module", "l1") in _calls(res, (verdict,))
            assert not _calls(res, ({"regression", "improvement"} - {verdict}).pop()), (seed, _calls(res))
            found_nb += ("native_call_addmm.out", "l3") in calls
        assert found_nb >= SEEDS - 1, (swap, found_nb)


def test_half_the_model_100x_faster_leaves_the_rest_alone(tmp_path):
    """A build that makes half the ops 100x faster: those are improvements, the unchanged half stays
    ``same`` (the shared-state fit only uses ops chance could have moved)."""
    m = LOADED
    half = list(range(0, m.ops, 2))
    for seed, (_sim, res) in enumerate(_run(tmp_path, m, {i: 0.01 for i in half}, seeds=range(6))):
        names = op_names(m.layers)
        better = {c for c in _calls(res, ("improvement",)) if c[0] != "module" and c != "model"}
        assert better == {names[i][:2] for i in half}, seed
        assert not [c for c in _calls(res, ("regression",))], (seed, _calls(res))


def test_fdr_q_values(tmp_path):
    """Benjamini-Hochberg over the ops of a comparison: q >= p for every row, q ordered as p, and an FDR no
    test can meet turns every op and module verdict back to ``same`` (the whole model is one test: it stays)."""
    m = replace(LOADED, layers=20)    # 59 ops
    effects = {3: 1.5, 10: 2.0, 30: 1.3}
    for _sim, res in _run(tmp_path, m, effects, seeds=range(4)):
        rows = [r for r in res["rows"] if r.get("p_value") is not None]
        assert len(rows) == m.ops
        assert all(r["q_value"] >= r["p_value"] for r in rows + res["modules"])
        by_p = sorted(rows, key=lambda r: r["p_value"])
        assert all(x["q_value"] <= y["q_value"] for x, y in zip(by_p, by_p[1:]))
        called = {(r["event_name"], r["debug_handles"]) for r in rows if r["verdict"] != "same"}
        names = op_names(m.layers)
        assert called <= {(names[i][0], names[i][2]) for i in effects} and len(called) >= 2
    for _sim, res in _run(tmp_path / "strict", m, effects, seeds=range(2), fdr=1e-300):
        assert all(r["verdict"] == "same" for r in res["rows"] + res["modules"])


def test_many_ops_same_build_no_false_call(tmp_path):
    """200 ops on a busy machine, the same build: with ~200 tests at p < 0.01 one false call is likely
    without the false-discovery-rate control; with it (and the floors) there is none, on any seed."""
    m = replace(BUSY, layers=67)
    for seed, (_sim, res) in enumerate(_run(tmp_path, m, seeds=range(3))):
        assert res["summary"]["ops"] == m.ops
        assert not [c for c in _calls(res) if c != "model"], (seed, _calls(res))


def test_simulation_is_deterministic(tmp_path):
    """The same seed gives the same bytes of timings (the reason these tests cannot flake)."""
    a = write_dataset(str(tmp_path / "a"), LOADED, 7, {HEAD_ADDMM: 1.3})
    b = write_dataset(str(tmp_path / "b"), LOADED, 7, {HEAD_ADDMM: 1.3})
    assert all(np.array_equal(a["durations"][r], b["durations"][r]) for r in ("A", "B"))
    d = a["durations"]
    assert np.allclose(d["B"][:, :, HEAD_ADDMM] / 1.3, d["B"][:, :, HEAD_ADDMM] / 1.3)
    assert d["A"].shape == (LOADED.procs, LOADED.runs, LOADED.ops) and (d["A"] > 0).all()
    assert a["hogged"]["A"].sum() == a["hogged"]["B"].sum() == LOADED.hog
