"""Build every inside-delegates case once (two child processes), cache the JSON by source hash."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CACHE, HAS_EXECUTORCH, ROOT

HERE = Path(__file__).resolve().parent
FAULTS = ["fault_mlp", "fault_cnn", "fault_transformer"]
#: the planted fault of the fast tier (the others, with the corpus, in the heavy tier)
FAST_FAULT = "fault_mlp"
#: corpus models inside delegates: an encoder and a ViT in int8, a CNN in fp32 (compared with tap_compare);
#: sized to the CI budget (bert fp32 and gpt2 int8 went for time; mobilevit: ~200 s to build,
#: docs/inside-delegates.md)
CORPUS = [("bert", "int8"), ("vit", "int8"), ("convnext", "fp32")]
CASES = FAULTS + [f"{m}_{v}" for m, v in CORPUS] + ["tap_convnext"]


def _key() -> str:
    h = hashlib.sha256()
    build = ROOT / "src" / "etlens" / "builder"
    # what _build.py runs (not bisect.py / race.py: the cases use neither)
    files = [build / "inside" / f for f in ("__init__.py", "engine.py", "graph.py", "result.py")] + [
        *(build / f for f in ("pipeline.py", "quantize.py", "worker.py", "child.py", "describe.py", "session.py",
                              "toolchain.py", "lower.py")),
        ROOT / "tests" / "corpus" / "models.py", HERE / "faults.py", HERE / "_build.py"]
    for p in files:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def inside_docs() -> dict[str, dict]:
    """``{case: the JSON document of inside_delegates}`` for every case of :data:`CASES` (the heavy tier)."""
    return _docs(CASES)


@pytest.fixture(scope="session")
def inside_faults() -> dict[str, dict]:
    """The fast tier's planted-fault case alone (:data:`FAST_FAULT`: a small model)."""
    return _docs([FAST_FAULT])


def _docs(cases: list[str]) -> dict[str, dict]:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra")
    from filelock import FileLock

    out = CACHE / f"inside-{_key()}"
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        missing = [c for c in cases if not (out / f"{c}.json").exists()]
        procs = [subprocess.Popen([sys.executable, str(HERE / "_build.py"), str(out), *missing[i::2]],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(2) if missing[i::2]]
        errors = []
        for p in procs:
            _o, err = p.communicate()
            if p.returncode != 0:
                errors.append(err[-4000:])
    docs = {c: json.loads((out / f"{c}.json").read_text()) for c in cases if (out / f"{c}.json").exists()}
    if errors and len(docs) < len(cases):
        raise RuntimeError("inside-delegates builds failed:\n" + "\n".join(errors))
    return docs
