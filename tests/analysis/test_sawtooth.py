"""The sawtooth fit of static-shape LLM sessions (``etlens.analysis.llm_phases.sawtooth``) on synthetic dumps.

The real-dump checks are in tests/llm/test_phases.py; here the attention series is built from the
physics the fit assumes, with the noise a loaded machine adds (measured on CI dumps, 2026-11-26):
a curve that grows with the position and steps up near position 96, single-run spikes of 3-20x on
about one run in ten, and stretches of 3-12 runs slowed 2-3x. A dump is right when the number of
sessions is exact and each later start within 3 runs (a slowed run just before a start reads like
the new session's first). The fit starts from the threshold's resets, as ``label_runs`` does.
"""

from __future__ import annotations

import numpy as np
import pytest

from etlens.analysis.llm_phases.sawtooth import fit_sessions


def _curve(p: np.ndarray) -> np.ndarray:
    """ms of attention at position ``p``: 12 ms + 0.3 per position, a 1.4x step from position 96."""
    return (12.0 + 0.3 * p) * np.where(p >= 96, 1.4, 1.0)


def _dump(sessions: list[int], seed: int, spikes: float = 0.1, stretches: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pos = np.concatenate([np.arange(n) for n in sessions]).astype(float)
    y = _curve(pos) * (1 + 0.03 * rng.random(len(pos)))          # timer jitter: a few percent, upward
    hit = rng.random(len(y)) < spikes
    y[hit] *= rng.uniform(3, 20, hit.sum())                       # a run preempted
    for _ in range(stretches):                                    # the machine busy for a while
        a = int(rng.integers(0, len(y)))
        y[a:a + int(rng.integers(3, 13))] *= rng.uniform(2, 3)
    y[0] *= 3                                                     # the first run of a dump is cold
    return y / 1000


def _starts(sessions: list[int]) -> list[int]:
    return list(np.cumsum([0, *sessions[:-1]]))


CASES = {
    "one_short": [17],
    "one_long": [258],
    "one_mid": [96],
    "three": [36, 28, 21],
    "four_uneven": [70, 24, 130, 40],
    "two_long": [200, 180],
}


def _threshold_starts(y: np.ndarray) -> list[int]:
    """The starts the threshold on the drop finds (what :func:`label_runs` hands the fit as ``initial``)."""
    from etlens.analysis.llm_phases.label import _add_resets, _reset_scores

    return _add_resets([0], {}, _reset_scores(y, np.zeros(len(y), bool), np.ones(len(y))), att=y)


def _right(got: list[int], want: list[int]) -> bool:
    return len(got) == len(want) and got[0] == 0 and all(abs(g - w) <= 3 for g, w in zip(got, want))


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("known", [False, True], ids=["count_unknown", "count_known"])
def test_sessions_found_on_noisy_dumps(name, known):
    """24 noisy dumps per case (a stretch of slowed runs per 100 runs, spikes on one run in ten): at most 3
    wrong (12 %: a 17-run dump can be slowed nearly whole), and never more than the threshold alone."""
    sessions = CASES[name]
    want = _starts(sessions)
    wrong = base_wrong = 0
    for seed in range(24):
        y = _dump(sessions, seed, stretches=1 + sum(sessions) // 100)
        init = _threshold_starts(y)
        fit = fit_sessions(y, n_sessions=len(sessions) if known else None,
                           min_len=[min(4, n) for n in sessions] if known else None, initial=init)
        assert fit is not None
        wrong += not _right(fit.starts, want)
        base_wrong += not _right(init, want)
    assert wrong <= 3, (name, wrong)
    assert wrong <= base_wrong, (name, wrong, base_wrong)


def test_quiet_dump_starts_are_exact():
    sessions = CASES["four_uneven"]
    y = _dump(sessions, 1, spikes=0.0, stretches=0)
    fit = fit_sessions(y, initial=_threshold_starts(y))
    assert fit.starts == _starts(sessions)
    assert all(0 < d < 1 for d in fit.drops.values())  # each start: the curve falls back


def test_no_attention_means_no_fit():
    assert fit_sessions(np.full(40, np.nan)) is None
    assert fit_sessions(np.ones(5)) is None            # too few runs to fit anything


def test_busy_runs_are_left_out():
    """Runs whose whole work was slowed beyond 3x the median are not evidence (``work``)."""
    sessions = [60, 60]
    y = _dump(sessions, 3, spikes=0.0, stretches=0)
    work = np.ones(len(y))
    y[20:30] /= 5           # a stretch that would look like a reset...
    work[20:30] = 10        # ...but the whole run was 10x slower: not usable
    fit = fit_sessions(y, work, initial=[0, 25, 60])
    assert fit.starts == [0, 60]
