"""A missing optional dependency is one error line naming the extra to install, never a misleading cause.

Each case runs the CLI in a child process whose ``sitecustomize`` puts an import blocker first on
``sys.meta_path``, so ``import torch`` (or executorch, tensorboard) fails there exactly as it does
on a light install, while the shared venv keeps them.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BLOCKER = '''
import os, sys
_BLOCK = tuple(x for x in os.environ.get("ETLENS_TEST_BLOCK", "").split(",") if x)

class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _BLOCK:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None

sys.meta_path.insert(0, _Blocker())
'''


@pytest.fixture(scope="module")
def blocker_env(tmp_path_factory):
    site = tmp_path_factory.mktemp("blocker")
    (site / "sitecustomize.py").write_text(BLOCKER)

    def env(blocked: str) -> dict:
        return dict(os.environ, ETLENS_TEST_BLOCK=blocked,
                    PYTHONPATH=os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))

    return env


@pytest.fixture(scope="module")
def run_without(blocker_env):
    def run(blocked: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "etlens", *args], capture_output=True, text=True,
                              env=blocker_env(blocked), timeout=300)

    return run


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("etlens: error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return lines[0]


def test_blocker_really_blocks(blocker_env):
    code = "import importlib.util, sys\ntry:\n    import torch\nexcept ModuleNotFoundError:\n    sys.exit(7)"
    assert subprocess.run([sys.executable, "-c", code], env=blocker_env("torch")).returncode == 7
    assert subprocess.run([sys.executable, "-c", code], env=blocker_env("")).returncode == 0


def test_gap_without_torch_names_the_extra(run_without, committed):
    case = committed["mlp_portable"]
    line = _one_error_line(run_without("torch,executorch", "gap", "--etdump", case.etdump, "--etrecord",
                                       case.etrecord, "--debug-buffer", case.debug_buffer))
    assert "needs torch: pip install 'etlens[torch]'" in line
    assert "something other than plain tensors" not in line


def test_pt2_without_torch(run_without, committed):
    line = _one_error_line(run_without("torch", "info", committed["mlp_portable"].pt2))
    assert "needs torch: pip install 'etlens[torch]'" in line and "could not read" not in line


def test_report_from_a_model_without_torch(run_without, tmp_path):
    line = _one_error_line(run_without("torch,executorch", "report", "--demo", "mlp", "-o", str(tmp_path / "r.html")))
    assert "needs torch" in line and "pip install 'etlens[torch]'" in line and "internal error" not in line


def test_trace_without_executorch(run_without, tmp_path):
    line = _one_error_line(run_without("executorch", "trace", "--demo", "mlp", "--backend", "xnnpack", "-o",
                                       str(tmp_path / "t.json")))
    assert "pip install 'etlens[executorch]'" in line


def test_tensorboard_without_the_package(run_without, committed, tmp_path):
    line = _one_error_line(run_without("tensorboard", "inspect", "--etdump", committed["mlp_portable"].etdump,
                                       "--tensorboard", str(tmp_path / "tb")))
    assert "pip install 'etlens[tensorboard]'" in line


def test_reading_without_torch_still_works(run_without, committed):
    """The light install's promise: .pte / .etdp / .etrecord summaries need no torch."""
    for path in (committed["mlp_xnnpack"].pte, committed["mlp_portable"].etdump, committed["mlp_xnnpack"].etrecord):
        proc = run_without("torch,executorch", "info", path)
        assert proc.returncode == 0, proc.stderr[-2000:]
