"""The third-party log of a command (``etlens._progress.quiet``): where it lives, when it is kept, how many.

While a command runs, stderr (native lines, torch warnings) goes to a log file. Checked here:

* an error where nothing third-party wrote (a missing file) names no log and leaves no file behind;
* an error after third-party output keeps the log in the per-user log directory and names it;
* a command that succeeds leaves no file behind;
* the directory holds at most ``MAX_LOGS`` logs: keeping one more removes the oldest;
* the directory is per-user (``$XDG_STATE_HOME/etlens/logs``, else ``~/.local/state/etlens/logs``), not /tmp.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from etlens._progress import MAX_LOGS, log_dir, quiet
from etlens.cli import info as info_cmd
from etlens.cli.main import main
from etlens.errors import EtlensError


@pytest.fixture
def logs(tmp_path, monkeypatch):
    """An empty log directory of its own for the test (``$ETLENS_LOG_DIR``)."""
    d = tmp_path / "logs"
    monkeypatch.setenv("ETLENS_LOG_DIR", str(d))
    return d


def _files(d) -> list[str]:
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_missing_file_names_no_log_and_leaves_none(logs, tmp_path):
    """A fresh process, as a user runs it: ``etlens info`` of a path that does not exist."""
    env = dict(os.environ, ETLENS_LOG_DIR=str(logs), TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "etlens", "info", str(tmp_path / "nope.pte")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "nope.pte" in proc.stderr and "third-party log" not in proc.stderr, proc.stderr
    assert _files(logs) == []
    assert not [n for n in os.listdir(tmp_path) if n.startswith("etlens-")]


def test_third_party_output_keeps_the_log_and_names_it(logs, monkeypatch, capsys):
    def run(args):
        os.write(2, b"[cpuinfo_utils.cpp:71] a native line\n")
        raise EtlensError("model.pte: the program failed to load; check the file")

    monkeypatch.setattr(info_cmd, "run", run)
    assert main(["info", "model.pte"]) == 1
    err = capsys.readouterr().err
    kept = _files(logs)
    assert len(kept) == 1, kept
    path = os.path.join(logs, kept[0])
    assert f"(third-party log: {path}; -v shows it live)" in err, err
    with open(path) as f:
        assert "a native line" in f.read()


def test_success_leaves_no_log(logs):
    with quiet() as path:
        os.write(2, b"noise of a command that works\n")
        assert os.path.dirname(path) == str(logs)
    assert _files(logs) == []


def test_empty_log_of_an_error_is_removed(logs):
    with pytest.raises(EtlensError) as info, quiet():
        raise EtlensError("x.pte: no such file")
    assert getattr(info.value, "etlens_log", None) is None
    assert _files(logs) == []


def test_logs_are_bounded_oldest_removed(logs):
    logs.mkdir()
    for i in range(MAX_LOGS + 5):
        p = logs / f"etlens-old-{i:02d}.log"
        p.write_text(f"old {i}\n")
        os.utime(p, (1_000_000 + i, 1_000_000 + i))
    (logs / "notes.txt").write_text("not a log: left alone\n")
    with pytest.raises(RuntimeError) as info, quiet():
        os.write(2, b"torch warning\n")
        raise RuntimeError("boom")
    kept = _files(logs)
    assert len([n for n in kept if n.endswith(".log")]) == MAX_LOGS
    assert os.path.basename(info.value.etlens_log) in kept  # the newest stays
    assert "etlens-old-24.log" in kept and "etlens-old-05.log" not in kept and "notes.txt" in kept


def test_log_dir_is_per_user(monkeypatch, tmp_path):
    monkeypatch.delenv("ETLENS_LOG_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert log_dir() == str(tmp_path / "state" / "etlens" / "logs")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert log_dir() == str(tmp_path / "home" / ".local" / "state" / "etlens" / "logs")
