"""Warm worker children (:mod:`etlens.builder.warm`): a closing worker hands its idle child to the next one.

Real children (the ``list-operators`` and ``run`` jobs on the ExecuTorch runtime): the second worker
gets the first one's process, a crashed or busy child is never handed on, a child started in another
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


def test_crashed_child_is_not_kept_and_its_log_is_read(pool):
    from etlens.builder.worker import NativeStageError, Worker

    with Worker() as first:
        first.list_operators()
        pid = first.pid
    with Worker() as second:
        second.list_operators()
        assert second.pid == pid
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(NativeStageError, match=r"crashed in its child process \(killed by signal 9\)"):
            second.list_operators()
        assert second.list_operators() and second.pid != pid and second.children == 2
        fresh = second.pid
    with Worker() as third:
        third.list_operators()
        assert third.pid == fresh


def test_other_environment_directory_or_measuring_worker_gets_a_fresh_child(pool, monkeypatch, tmp_path):
    from etlens.builder.worker import Worker

    with Worker() as first:
        first.list_operators()
        pid = first.pid
    monkeypatch.setenv("ETLENS_TEST_MARK", "other")
    with Worker() as other_env:
        other_env.list_operators()
        assert other_env.pid != pid
    assert not _alive(pid)  # a full pool keeps the newest child: the one of the other environment
    monkeypatch.delenv("ETLENS_TEST_MARK")
    with Worker() as again:
        again.list_operators()
        pid = again.pid
    monkeypatch.chdir(tmp_path)
    with Worker() as other_dir:
        other_dir.list_operators()
        assert other_dir.pid != pid
    monkeypatch.chdir(os.path.dirname(__file__))
    with Worker(warm=False) as measuring:
        measuring.list_operators()
        assert measuring.pid != pid
    with Worker(verbose=True) as shown:  # its stderr is the terminal: no log to hand on
        assert not shown.warm


def test_pool_off_stops_the_child(pool):
    from etlens.builder.worker import Worker

    pool.keep_warm(0)
    with Worker() as w:
        w.list_operators()
        pid = w.pid
    assert not _alive(pid) and pool.take(pool.key(os.environ.copy())) is None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (stopped, not yet reaped) counts as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][0] != "Z"
