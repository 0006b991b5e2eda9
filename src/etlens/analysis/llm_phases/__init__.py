"""LLM phases from timing-only ETDumps: the program's token inputs, per-run timing signals, prefill / decode
labels and sessions, and per-session speed (TTFT, tokens/s, latency percentiles, drift).

:func:`etlens.analysis.llm.llm_profile` uses this when a dump has no intermediate outputs (what a
user profiles on a device: no debug buffer); see :mod:`.label` for what can and cannot be told.
"""

from .label import PEAK, WINDOW, PhaseLabels, label_runs, parse_prompt_lens
from .program import LlmInputs, llm_inputs
from .rows import LLM_MARKERS, is_llm_name, label_rows
from .signals import RunSignals, forward_signals, signals_from_matrix
from .stats import SessionStats, percentiles, session_stats, theil_sen

__all__ = ["LlmInputs", "llm_inputs", "RunSignals", "forward_signals", "signals_from_matrix", "PhaseLabels",
           "label_runs", "parse_prompt_lens", "PEAK", "WINDOW", "SessionStats", "session_stats", "percentiles",
           "theil_sen", "LLM_MARKERS", "is_llm_name", "label_rows"]
