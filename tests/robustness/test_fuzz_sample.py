"""Quick fuzz sample for the default suite: every reader, mutated committed artifacts.

The same properties run with 10k+ inputs per reader in ``tests/fuzz`` (``pytest -m fuzz tests/fuzz``);
here each reader gets a small derandomized sample so the default suite stays fast and repeatable.
Oracle (see ``_harness``): a result or an ``EtlensError``; nothing else, under 2 s, under 200 MB heap.
"""

from __future__ import annotations

import pytest

import _strategies as S

SAMPLE = {"pte": 60, "etdump": 60, "debug": 40, "etrecord": 25, "pt2": 8, "trace": 40, "graph": 40}


@pytest.mark.parametrize("kind", S.KINDS)
def test_fuzz_sample(kind):
    S.reader_property(kind, SAMPLE[kind])()
