"""Quick fuzz sample for the default suite: every reader, mutated committed artifacts.

The same properties run with 10k+ inputs per reader in ``tests/fuzz`` (``pytest -m fuzz tests/fuzz``);
here each reader gets a small derandomized sample so the default suite stays fast and repeatable.
Oracle (see ``_harness``): a result or an ``EtlensError``; nothing else, under 2 s, under 200 MB heap.
"""

from __future__ import annotations

import pytest

import _strategies as S

SAMPLE = {"pte": 40, "etdump": 40, "debug": 25, "etrecord": 20, "pt2": 6, "trace": 25, "graph": 25}


@pytest.mark.parametrize("kind", S.KINDS)
def test_fuzz_sample(kind):
    S.reader_property(kind, SAMPLE[kind])()
