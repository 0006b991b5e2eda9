"""Inputs the coverage-guided fuzzer (``scripts/fuzz_readers.py``) found failing, kept as regressions.

``cases/<format>/<what it was>.<ext>``: each must end in a result or an :class:`etlens.errors.EtlensError`
under the robustness oracle (``tests/robustness/_harness.py``: the reader plus every lazy part a user can
reach, under a CPU-time limit). In the default test run (not the ``fuzz`` marker): they are a few files.

* ``etrecord/zlib-error-corrupt-deflate-stream.etrecord``: an ETRecord whose entries are deflate-compressed, one
  stream's bytes mutated; ``zipfile`` raised ``zlib.error`` ("invalid distance too far back") out of
  ``readers/_zipsafe.py`` (228 of 47 215 mutated ETRecords in a 14-minute run); now a ``FormatError`` naming
  the entry.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.robustness import _harness as H

CASES = sorted(p for p in (Path(__file__).parent / "cases").glob("*/*") if p.is_file())
#: the error each case must end in (None: a result is fine too)
EXPECTED = {"zlib-error-corrupt-deflate-stream.etrecord": "FormatError"}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzzcases")
    H.warm_up(H.committed_seeds(), d)      # imports outside the timed inputs
    return d


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fuzz_case(case, work):
    out = H.check(case.parent.name, case.read_bytes(), work, name=case.stem)
    assert out.failure is None, out.failure
    assert out.ok or out.error
    if case.name in EXPECTED:
        assert out.error == EXPECTED[case.name]


def test_every_case_has_a_known_format():
    assert CASES
    assert {p.parent.name for p in CASES} <= set(H.EXT)
