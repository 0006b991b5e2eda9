"""The llm-diff corpus (``tests/llm_diff/build.py``), built once per generator source into the fixture cache.

``llm_diff_corpus`` is session-scoped: the first test that asks for it runs the generator (ExecuTorch's
``export_llama`` on seeded 4-layer checkpoints, planted faults included; 10-30 minutes on 2 busy cores,
the 8da4w exports are the slow part) into ``$ETLENS_FIXTURE_CACHE/llm_diff-<hash of build.py +
export_llama.py>/``.
Each case is a ``SimpleNamespace`` with absolute paths (``pte``, ``etrecord``, ``checkpoint``,
``params_json``, ``dir``) and the manifest entry (``fault``, ``quantization``, ``dynamic_shape`` ...);
``tokens`` is the 64-token prompt file.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once

BUILD = Path(__file__).resolve().parent / "build.py"
EXPORT_LLAMA = BUILD.parent.parent / "llm" / "export_llama.py"  # what build.py shares with tests/llm's builds
PATH_KEYS = ("pte", "etrecord", "checkpoint", "params_json")


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
    return SimpleNamespace(cases=cases, tokens=str(out / "tokens64.txt"), dir=str(out))
