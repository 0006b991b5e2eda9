"""Two LLM builds compared token by token, down to the first divergent layer (``etlens llm-diff``).

* :mod:`.metrics` — per-position KLD, top-1, top-k overlap, next-token log-probabilities, and the
  llama.cpp-style summary (KLD mean/median/p90/p99/max, same-top-token %, perplexity ratio);
* :mod:`.layers` — relative error per module x position, matched by module path, and the first
  layer whose error leaves the noise floor;
* :mod:`.eager` — the float source (checkpoint + params.json) run in PyTorch, module outputs hooked;
* :mod:`.capture` — a build's module outputs per position from its ETDump + ETRecord;
* :mod:`.compare` — :func:`llm_diff`: both sides run (``.pte`` sides in the build worker's child, job
  ``llm-run``), checked comparable, and compared.

Example::

    from etlens.analysis.llm_diff import Side, llm_diff
    res = llm_diff(Side("fp32.pte"), Side("q8.pte"), tokens)
    res.summary["kld_mean"], res.summary["first_divergent_layer"]
"""

from .compare import LlmDiffResult, Side, llm_diff
from .layers import LayerTable, compare_layers
from .metrics import kl_divergence, position_stats, summarize

__all__ = ["LayerTable", "LlmDiffResult", "Side", "compare_layers", "kl_divergence", "llm_diff", "position_stats",
           "summarize"]
