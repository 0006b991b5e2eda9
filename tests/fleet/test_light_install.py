"""The light install: the core dependencies alone (no torch, no executorch, no scipy) run the file commands.

A fresh venv (``--without-pip``, nothing downloaded) sees only the core packages of ``pip install etlens``
(numpy, pandas, pyarrow, duckdb, tabulate, tqdm and what they import), linked from the test venv, plus
etlens' sources; ``import torch`` fails there. ``info``, ``inspect``, ``collect`` (with an ETRecord),
``query`` and ``compare`` must work on the committed ``tests/data`` artifacts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
#: top-level names of the core dependencies and their own imports
CORE = {"numpy", "numpy.libs", "pandas", "pandas.libs", "pyarrow", "pyarrow.libs", "duckdb", "_duckdb", "dateutil",
        "pytz", "tzdata", "six", "tabulate", "tqdm", "wcwidth", "cloudpickle", "_cyutility"}


def _light_venv(tmp: Path) -> Path:
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    deps = tmp / "deps"
    deps.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        stem = entry.name.split("-")[0].split(".")[0]   # numpy, numpy.libs, numpy-2.x.dist-info, _duckdb….so
        if stem in CORE or entry.name in CORE:
            (deps / entry.name).symlink_to(entry)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "etlens-core.pth").write_text(f"{deps}\n{ROOT / 'src'}\n")
    return py


def test_core_alone_runs_the_file_commands(tmp_path):
    py = _light_venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    probe = subprocess.run([str(py), "-c", "import torch"], capture_output=True, text=True, env=env)
    assert probe.returncode != 0, "torch must not be importable in the light venv"
    ds = tmp_path / "ds"
    etdp, rec = str(DATA / "mlp_portable.etdp"), str(DATA / "mlp_portable.etrecord")
    commands = [
        ["info", str(DATA / "mlp_portable.pte")],
        ["inspect", "--etdump", etdp, "--etrecord", rec],
        ["collect", etdp, str(DATA / "mlp_xnnpack.etdp"), "-o", str(ds), "--etrecord", rec, "--meta", "device=a"],
        ["query", str(ds), "--by", "device", "--format", "json"],
        ["compare", etdp, etdp, "--etrecord-a", rec, "--etrecord-b", rec],
    ]
    for cmd in commands:
        proc = subprocess.run([str(py), "-m", "etlens", *cmd], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, (cmd, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr
    loaded = subprocess.run([str(py), "-c", "import sys, etlens.fleet, etlens.readers; "
                             "print('torch' in sys.modules)"], capture_output=True, text=True, env=env)
    assert loaded.stdout.strip() == "False"


@pytest.mark.skipif(sys.platform != "linux", reason="symlinked site-packages")
def test_torch_commands_say_what_to_install(tmp_path):
    py = _light_venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run([str(py), "-m", "etlens", "report", "--demo", "mlp", "-o", str(tmp_path / "r.html")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and ("torch" in err[0] or "executorch" in err[0].lower()), err
