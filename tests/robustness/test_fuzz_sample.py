"""Quick fuzz sample for the default suite: every reader, mutated committed artifacts.

The same properties run with 10k+ inputs per reader in ``tests/fuzz`` (``pytest -m fuzz tests/fuzz``);
here each reader gets a small derandomized sample so the default suite stays fast and repeatable.
Oracle (see ``_harness``): a result or an ``EtlensError``; nothing else, under 2 s, under 200 MB heap.
"""

from __future__ import annotations

import pytest

from tests.robustness import _strategies as S

SAMPLE = {"pte": 40, "bpte": 40, "etdump": 40, "debug": 25, "etrecord": 20, "pt2": 6, "trace": 25, "graph": 25}


@pytest.mark.parametrize("kind", S.KINDS)
def test_fuzz_sample(kind):
    S.reader_property(kind, SAMPLE[kind])()


def test_fuzz_session_artifacts(artifacts, tmp_path):
    """Bigger real programs (quantized CNN, transformer, partial delegation) from the session
    fixture: a few seeded mutations of each one's .pte, .etdp (+ debug buffer) and .etrecord."""
    import random

    from tests.robustness import _harness as H

    rng = random.Random(1)
    checked = 0
    with H.memory_tracing():
        H.warm_up(S.seeds(), tmp_path)
        for case, ns in sorted(artifacts.items()):
            for kind, path in (("pte", ns.pte), ("etdump", ns.etdump), ("etrecord", ns.etrecord)):
                data = open(path, "rb").read()
                hot = H.flatbuffer_hot_positions(data) if kind != "etrecord" else []
                for _ in range(6 if kind != "etrecord" else 2):
                    blob = (H.mutate_zip(rng, data) if kind == "etrecord"
                            else H.apply_ops(data, H.random_ops(rng, len(data), hot)))
                    dbg = open(ns.debug_buffer, "rb").read()[:1 << 18] if kind == "etdump" else None
                    out = H.check(kind, blob, tmp_path, debug=dbg)
                    assert out.failure is None, f"{case} {kind}: {out.failure}"
                    checked += 1
    assert checked >= 6 * 14
