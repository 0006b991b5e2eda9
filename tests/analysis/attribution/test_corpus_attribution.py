"""Real architectures (tests/corpus) lowered to XNNPACK, fp32 and int8: >= 90% of the time of the
operator events inside delegates is attributed to ATen nodes with a module.

The int8 ResNet case runs in the first tier (its build is one of tests/corpus/test_corpus.py's fast cases),
the others in the heavy tier (``-m corpus``). It reads the corpus' own builds
(:func:`tests.corpus.conftest.build_case`, cached per source version and shared with
tests/corpus/test_corpus.py through the same ``xdist_group``), so it adds no lowering of its own.
"""

from __future__ import annotations

import warnings

import pytest

from tests.conftest import requires_executorch
from tests.corpus.conftest import build_case

pytestmark = [requires_executorch]
FAST = "resnet:int8-xnnpack"

#: corpus cases (architecture:config); ConvNeXt has no int8 corpus build, ResNet int8 stands for the CNNs
CASES = ["vit:fp32-xnnpack", "vit:int8-xnnpack", "bert:fp32-xnnpack", "bert:int8-xnnpack",
         "convnext:fp32-xnnpack", "resnet:int8-xnnpack"]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.replace(":", "-"),
                                               marks=[pytest.mark.xdist_group(c)] + ([] if c == FAST else
                                                                                      [pytest.mark.corpus]))
                                  for c in CASES])
def test_corpus_attribution(case):
    import etlens

    a = build_case(*case.split(":"))
    assert a.result.get("ok"), a.result.get("error")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        insp = etlens.Inspector(etdump_path=a.etdump, etrecord=a.etrecord, pte=a.pte)
    s = insp.attribution().summary()
    assert s["delegate_internal_ms"] > 0
    assert s["attributed_fraction"] >= 0.9, s
