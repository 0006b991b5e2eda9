"""The llm-diff corpus (``tests/llm_diff/build.py``), built once per generator source into the fixture cache.

``llm_diff_corpus`` is session-scoped: the first test that asks for it runs the generator (ExecuTorch's
``export_llama`` on seeded 4-layer checkpoints, planted faults included; 10-30 minutes on 2 busy cores,
the 8da4w exports are the slow part) into ``$ETLENS_FIXTURE_CACHE/llm_diff-<hash of build.py +
export_llama.py>/``.
Each case is a ``SimpleNamespace`` with absolute paths (``pte``, ``etrecord``, ``checkpoint``,
``params_json``, ``dir``) and the manifest entry (``fault``, ``quantization``, ``dynamic_shape`` ...);
``fp32_fault0`` .. ``fp32_fault9`` are the fp32 build with fault seed N planted in the ``.pte``
(:mod:`tests.llm_diff.plant`, milliseconds each, cached next to the corpus);
``tokens`` is the 64-token prompt file.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once
from tests.llm_diff.build import fault_of
from tests.llm_diff.plant import planted_pte

BUILD = Path(__file__).resolve().parent / "build.py"
EXPORT_LLAMA = BUILD.parent.parent / "llm" / "export_llama.py"  # what build.py shares with tests/llm's builds
PATH_KEYS = ("pte", "etrecord", "checkpoint", "params_json")
PLANTED_SEEDS = 10


@pytest.fixture(scope="session")
def llm_diff_corpus() -> SimpleNamespace:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the llm-diff corpus")
    out = build_once("llm_diff", BUILD, (EXPORT_LLAMA,))
    manifest = json.loads((out / "manifest.json").read_text())
    cases = {}
    for name, entry in manifest.items():
        ns = SimpleNamespace(name=name, dir=str(out / name), **entry)
        for k in PATH_KEYS:
            setattr(ns, k, str(out / entry[k]))
        cases[name] = ns
    # fp32 planted faults of seeds 0..9: the fp32 build with one weight scaled in the .pte itself
    # (tests/llm_diff/plant.py: byte for byte what export_llama makes from the disturbed checkpoint)
    base = cases["fp32"]
    for seed in range(PLANTED_SEEDS):
        name = f"fp32_fault{seed}"
        d = out / "planted" / name
        if not (d / "model.pte").exists():
            planted_pte(base.dir, fault_of(seed), str(d))
        cases[name] = SimpleNamespace(**{**vars(base), "name": name, "dir": str(d), "pte": str(d / "model.pte"),
                                         "etrecord": str(d / "etrecord.bin"), "fault": {"seed": seed, **fault_of(seed)},
                                         "planted": "in the .pte"})
    return SimpleNamespace(cases=cases, tokens=str(out / "tokens64.txt"), dir=str(out))
