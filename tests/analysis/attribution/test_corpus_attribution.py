"""Real architectures (tests/corpus) lowered to XNNPACK, fp32 and int8: >= 90% of the time of the
operator events inside delegates is attributed to ATen nodes with a module.

Opt-in (each build takes 20-80 s): ``ETLENS_CORPUS=1 pytest tests/analysis/attribution``; the
artifacts are cached like the other fixtures.
"""

from __future__ import annotations

import os
import warnings

import pytest

from tests.analysis.attribution.conftest import build_cases
from tests.conftest import requires_executorch

pytestmark = [requires_executorch,
              pytest.mark.skipif(os.environ.get("ETLENS_CORPUS") != "1", reason="set ETLENS_CORPUS=1 (slow builds)")]


@pytest.mark.parametrize("case", ["vit_fp32", "vit_int8", "bert_fp32", "bert_int8", "convnext_fp32",
                                  "convnext_int8"])
def test_corpus_attribution(case):
    import etlens

    a = build_cases(case)[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        insp = etlens.Inspector(etdump_path=a.etdump, etrecord=a.etrecord, pte=a.pte)
    s = insp.attribution().summary()
    assert s["delegate_internal_ms"] > 0
    assert s["attributed_fraction"] >= 0.9, s
