"""Shared code for the numerics tests: build ExecuTorch's and etlens's inspectors once per case."""

from __future__ import annotations

import logging
import math
import warnings

CASES = ["mlp_xnnpack", "mlp_portable", "cnn_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack", "transformer_portable"]
#: cases where ExecuTorch's own calculate_numeric_gap works (it raises on the transformer; see the bug test)
ET_WORKS = [c for c in CASES if c != "transformer_portable"]


def inspectors(art):
    """``(executorch Inspector, etlens Inspector)`` for one artifacts namespace."""
    from executorch.devtools import Inspector as ETInspector

    from etlens.analysis.inspector import Inspector

    logging.getLogger().setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        et = ETInspector(etdump_path=art.etdump, etrecord=art.etrecord, debug_buffer_path=art.debug_buffer)
    ours = Inspector(etdump_path=art.etdump, etrecord=art.etrecord, debug_buffer_path=art.debug_buffer)
    return et, ours


def close(x: float, y: float, rel: float = 1e-6) -> bool:
    if math.isnan(x) and math.isnan(y):
        return True
    if x == y:
        return True
    return abs(x - y) <= rel * max(abs(x), abs(y))


def assert_same_rows(et_df, ours_df, check_stacktraces: bool = True) -> None:
    """Same columns, same op groups and handles in the same order, gaps within 1e-6 relative."""
    assert list(ours_df.columns) == list(et_df.columns)
    assert len(ours_df) == len(et_df)
    for i in range(len(et_df)):
        a, o = et_df.iloc[i], ours_df.iloc[i]
        assert tuple(o.aot_debug_handle) == tuple(a.aot_debug_handle), i
        assert tuple(o.runtime_debug_handle) == tuple(a.runtime_debug_handle), i
        assert list(o.aot_ops) == list(a.aot_ops), i
        assert list(o.runtime_ops) == list(a.runtime_ops), i
        assert len(o.gap) == len(a.gap)
        for x, y in zip(a.gap, o.gap):
            assert close(float(x), float(y)), (i, x, y)
        if check_stacktraces:
            assert o.stacktraces == a.stacktraces, i


def lowered_artifacts(out, model, inputs, backend):
    """Lower ``model`` with ``backend``, save its ETRecord (with the inputs), run once with a debug buffer."""
    from types import SimpleNamespace

    from etlens.builder.pipeline import lower, run_with_etdump

    _, _, et = lower(model, inputs, backend=backend)
    art = SimpleNamespace(etrecord=str(out / "m.etrecord"), etdump=str(out / "m.etdp"),
                          debug_buffer=str(out / "m.debug.bin"))
    rec = et.get_etrecord()
    rec.update_representative_inputs([inputs])
    rec.save(art.etrecord)
    run_with_etdump(et.buffer, inputs, 1, art.etdump, art.debug_buffer)
    return art


def lowered_corpus_model(tmp_path_factory, name: str, backend: str = "xnnpack"):
    """:func:`lowered_artifacts` of the corpus model ``name`` (tests/corpus/models.py) in a fresh directory."""
    from tests.corpus.models import build

    model, inputs = build(name)
    return lowered_artifacts(tmp_path_factory.mktemp(name), model, inputs, backend)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def both(artifacts):
    """``case -> (executorch Inspector, etlens Inspector)``, built on first use."""
    cache = {}

    def get(case):
        if case not in cache:
            cache[case] = inspectors(artifacts[case])
        return cache[case]

    return get
