"""Two LLM builds compared token by token, down to the first divergent layer (``etlens llm-diff``).

* :mod:`.metrics` — per-position KLD, top-1, top-k overlap, next-token log-probabilities, and the
  llama.cpp-style summary (KLD mean/median/p90/p99/max, same-top-token %, perplexity ratio);
* :mod:`.layers` — relative error per module x position, matched by module path, and the first
  layer whose error leaves the noise floor;
* :mod:`.eager` — the float source (checkpoint + params.json) run in PyTorch, module outputs hooked.
"""

from .layers import LayerTable, compare_layers
from .metrics import kl_divergence, position_stats, summarize

__all__ = ["LayerTable", "compare_layers", "kl_divergence", "position_stats", "summarize"]
