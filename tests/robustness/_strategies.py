"""Hypothesis strategies over the harness's mutation ops, and one property per reader.

``reader_property(kind, max_examples)`` builds the ``@given`` test used by both the quick sample
(default suite) and the long target (``tests/fuzz``), so the two run the same oracle.
"""

from __future__ import annotations

import os
import random
import tempfile
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.robustness import _harness as H

_SEEDS: dict | None = None
_HOT: dict[str, list[int]] = {}


def seeds() -> dict[str, list[tuple[str, bytes]]]:
    global _SEEDS
    if _SEEDS is None:
        _SEEDS = H.committed_seeds()
    return _SEEDS


def hot(label: str, data: bytes) -> list[int]:
    if label not in _HOT:
        _HOT[label] = H.flatbuffer_hot_positions(data)
    return _HOT[label]


_OPS_CACHE: dict = {}


def byte_ops(n: int, hot_positions: list[int]):
    """A list of 1-5 mutation ops (see ``_harness.apply_ops``), biased to FlatBuffer offset positions."""
    key = (n, id(hot_positions))
    if key not in _OPS_CACHE:
        _OPS_CACHE[key] = _byte_ops(n, hot_positions)
    return _OPS_CACHE[key]


def _byte_ops(n: int, hot_positions: list[int]):
    pos = st.integers(0, max(n - 1, 0))
    if hot_positions:
        # an index into the list, not sampled_from: hypothesis re-validates big sampled lists per draw
        pos = st.one_of(st.integers(0, len(hot_positions) - 1).map(hot_positions.__getitem__), pos)
    one = st.one_of(
        st.tuples(st.just("u32"), pos, st.sampled_from(H.ABSURD_U32 + (n, n + 4, n - 4))),
        st.tuples(st.just("u16"), pos, st.sampled_from(H.ABSURD_U16)),
        st.tuples(st.just("i64"), pos, st.sampled_from(H.ABSURD_I64)),
        st.tuples(st.just("flip"), pos, st.integers(0, 7)),
        st.tuples(st.just("run"), pos, st.sampled_from((1, 4, 8, 64, 512)), st.sampled_from(H.FILL_BYTES)),
        st.tuples(st.just("insert"), pos, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), pos, st.sampled_from((1, 4, 16))),
        st.tuples(st.just("dup"), pos, pos, st.sampled_from((4, 8, 32))),
    )
    trunc = st.one_of(st.just([]), st.just([]), st.just([]),
                      st.integers(0, max(n - 1, 0)).map(_truncate_op))
    return st.tuples(st.lists(one, min_size=1, max_size=5), trunc).map(_concat)


def _truncate_op(cut: int) -> list:
    return [("truncate", cut)]


def _concat(t: tuple) -> list:
    return t[0] + t[1]


@st.composite
def mutated(draw, kind: str):
    """``(label, bytes)``: a committed seed of ``kind`` mutated at the byte or structure level."""
    label, data = draw(st.sampled_from(seeds()[kind]))
    structural = kind in ("etrecord", "pt2", "trace", "graph") and draw(st.integers(0, 9)) < 7
    if structural:
        rng = draw(st.randoms(use_true_random=False))
        if kind in ("etrecord", "pt2"):
            return label + " (zip entry mutated)", H.mutate_zip(rng, data)
        return label + " (json mutated)", H.mutate_json_text(rng, data)
    h = hot(label, data) if kind in ("pte", "bpte", "etdump") else []
    ops = draw(byte_ops(len(data), h))
    return f"{label} {ops}", H.apply_ops(data, ops)


@st.composite
def debug_pair(draw):
    """A valid ETDump (sometimes mutated) with a truncated or mutated debug buffer."""
    etdp, dbg = H.debug_seed()
    label = "mlp_portable"
    if draw(st.integers(0, 3)) == 0:
        ops = draw(byte_ops(len(etdp), hot(label, etdp)))
        etdp = H.apply_ops(etdp, ops)
        label += f" etdp {ops}"
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(dbg)))
        dbg = dbg[:cut]
        label += f" debug[:{cut}]"
    else:
        ops = draw(byte_ops(len(dbg), []))
        dbg = H.apply_ops(dbg, ops)
        label += f" debug {ops}"
    return label, etdp, dbg


def seeded_input(kind: str, seed: int) -> tuple[str, bytes, bytes | None]:
    """``(label, bytes, debug bytes)`` mutated by a seeded ``random.Random`` (the long target's
    cheap path: hypothesis draws one integer per input instead of a whole op list)."""
    rng = random.Random(seed)
    if kind == "debug":
        etdp, dbg = H.debug_seed()
        if rng.random() < 0.3:
            etdp = H.apply_ops(etdp, H.random_ops(rng, len(etdp), hot("mlp_portable", etdp)))
        if rng.random() < 0.5:
            dbg = dbg[:rng.randrange(len(dbg) + 1)]
        else:
            dbg = H.apply_ops(dbg, H.random_ops(rng, len(dbg), []))
        return f"debug seed {seed}", etdp, dbg
    label, data = rng.choice(seeds()[kind])
    r = rng.random()
    if kind in ("etrecord", "pt2") and r < 0.6:
        return f"{label} zip seed {seed}", H.mutate_zip(rng, data), None
    if kind in ("trace", "graph") and r < 0.8:
        return f"{label} json seed {seed}", H.mutate_json_text(rng, data), None
    h = hot(label, data) if kind in ("pte", "bpte", "etdump") else []
    return f"{label} bytes seed {seed}", H.apply_ops(data, H.random_ops(rng, len(data), h)), None


def seeded_property(kind: str, max_examples: int, *, memory: bool = True, counter: list | None = None):
    """Like :func:`reader_property` but hypothesis draws only a seed (fast enough for 10k+ inputs)."""

    budget = float(os.environ.get("ETLENS_FUZZ_BUDGET_S", "inf"))
    t0 = time.monotonic()

    @settings(max_examples=max_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              print_blob=True)
    @given(st.integers(0, 2 ** 63))
    def prop(seed):
        if time.monotonic() - t0 > budget:
            return  # over the wall-clock budget: the remaining examples are no-ops (counted apart)
        label, blob, dbg = seeded_input(kind, seed)
        out = H.check("etdump" if kind == "debug" else kind, blob, _WORK.name, debug=dbg)
        if counter is not None:
            counter.append((label, out))
        assert out.failure is None, f"{kind} input {label}:\n{out.failure}"

    def run():
        H.warm_up(seeds(), _WORK.name)
        if memory:
            with H.memory_tracing():
                prop()
        else:
            prop()

    run.__name__ = f"fuzz_seeded_{kind}"
    return run


def reader_property(kind: str, max_examples: int, *, memory: bool = True):
    """A zero-argument test function: ``max_examples`` mutated inputs through the oracle."""

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=max_examples <= 200,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(st.data())
    def prop(data):
        if kind == "debug":
            label, etdp, dbg = data.draw(debug_pair(), label="input")
            out = H.check("etdump", etdp, _WORK.name, debug=dbg)
        else:
            label, blob = data.draw(mutated(kind), label="input")
            out = H.check(kind, blob, _WORK.name)
        assert out.failure is None, f"{kind} input {label[:2000]}:\n{out.failure}"

    def run():
        H.warm_up(seeds(), _WORK.name)
        if memory:
            with H.memory_tracing():
                prop()
        else:
            prop()

    run.__name__ = f"fuzz_{kind}"
    return run


_WORK = tempfile.TemporaryDirectory(prefix="etlens-fuzz-")
KINDS = ("pte", "bpte", "etdump", "debug", "etrecord", "pt2", "trace", "graph")
random.seed(0)
