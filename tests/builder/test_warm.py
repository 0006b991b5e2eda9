"""Warm worker children (:mod:`etlens.builder.warm`): a closing worker hands its idle child to the next one.

Real children (the runtime's ``list-operators`` once; otherwise a ``lower`` job on a missing file, which the
child answers with a Python error and goes on: a job without torch's imports): the second worker gets the
first one's process, a crashed or busy child is never handed on, a child started in another
environment or directory serves nobody else, a worker that measures its own child never takes one,
and ``keep_warm(0)`` stops the idle ones.
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import requires_executorch

pytestmark = requires_executorch


@pytest.fixture
def pool():
    from etlens.builder import warm

    warm.stop_all()
    warm.keep_warm(1)
    yield warm
    warm.stop_all()
    warm._limit = None  # back to ETLENS_WARM_CHILDREN


def test_second_worker_gets_the_first_ones_child(pool):
    from etlens.builder.worker import Worker

    with Worker() as first:
        ops = first.list_operators()
        pid = first.pid
    assert pid is not None and os.path.exists(f"/proc/{pid}")  # kept, not stopped
    with Worker() as second:
        assert second.pid is None  # nothing started before the first job
        assert second.list_operators() == ops and second.pid == pid
        assert second.children == 1 and second.ready()
    pool.keep_warm(0)
    assert not _alive(pid)


def _touch(worker) -> int:
    """One job in ``worker``'s child (a Python error it survives); the child's pid."""
    from etlens.builder.worker import NativeStageError

    with pytest.raises(NativeStageError, match="lower failed: MissingDataError"):
        worker.lower("/nonexistent/model.pt2", "/nonexistent/model.pte")
    return worker.pid


def test_crashed_child_is_not_kept_and_its_log_is_read(pool):
    from etlens.builder.worker import NativeStageError, Worker

    with Worker() as first:
        pid = _touch(first)
    with Worker() as second:
        assert _touch(second) == pid
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(NativeStageError, match=r"crashed in its child process \(killed by signal 9\)"):
            second.lower("/nonexistent/model.pt2", "/nonexistent/model.pte")
        fresh = _touch(second)
        assert fresh != pid and second.children == 2
    with Worker() as third:
        assert _touch(third) == fresh


@pytest.mark.slow  # five fresh children
def test_other_environment_directory_or_measuring_worker_gets_a_fresh_child(pool, monkeypatch, tmp_path):
    from etlens.builder.worker import Worker

    with Worker() as first:
        pid = _touch(first)
    monkeypatch.setenv("ETLENS_TEST_MARK", "other")
    with Worker() as other_env:
        assert _touch(other_env) != pid
    assert not _alive(pid)  # a full pool keeps the newest child: the one of the other environment
    monkeypatch.delenv("ETLENS_TEST_MARK")
    with Worker() as again:
        pid = _touch(again)
    monkeypatch.chdir(tmp_path)
    with Worker() as other_dir:
        assert _touch(other_dir) != pid
    monkeypatch.chdir(os.path.dirname(__file__))
    with Worker(warm=False) as measuring:
        assert _touch(measuring) != pid
    with Worker(verbose=True) as shown:  # its stderr is the terminal: no log to hand on
        assert not shown.warm


def test_pool_off_stops_the_child(pool):
    from etlens.builder.worker import Worker

    pool.keep_warm(0)
    with Worker() as w:
        pid = _touch(w)
    assert not _alive(pid) and pool.take(pool.key(os.environ.copy())) is None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (stopped, not yet reaped) counts as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][0] != "Z"
