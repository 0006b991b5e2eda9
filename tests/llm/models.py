"""Tiny Llamas built as modules from ExecuTorch's own ``examples/models/llama`` code (random weights).

The same Transformer ``export_llama`` exports, with the same source transforms for
``-kv --use_sdpa_with_kv_cache`` (``llama::custom_sdpa`` + ``llama::update_cache`` on a KV cache
buffer) and, for ``8da4w``, ExecuTorch's own ``quantize(model, "8da4w")`` (torchao
``Int8DynActInt4Weight``: int8 dynamic activations, 4-bit grouped weights). Used by
``etlens report --model`` / ``etlens gap --model … --inside-delegates``::

    etlens gap --model tests/llm/models.py:tiny_llama_8da4w --inside-delegates

Each builder returns ``(module, example_inputs)``: the module's ``forward(tokens, input_pos)``
is the exported method's signature (``export_llama`` exports ``(tokens, {"input_pos": pos})``,
which flattens to the same two tensors); the example is a 5-token prefill at position 0. Weights
are random but seeded and scaled like a trained model's (norm weights 1, small linear weights),
so the numbers are finite and the comparison meaningful.
"""

from __future__ import annotations

import torch

PARAMS = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 256, "multiple_of": 32,
          "norm_eps": 1e-5, "rope_theta": 10000.0}
MAX_SEQ_LEN = 32
PROMPT = 5


class _Method(torch.nn.Module):
    """``forward(tokens, input_pos)`` over the Llama Transformer's ``forward(tokens, {"input_pos": …})``."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        return self.inner(tokens, {"input_pos": input_pos})


def _build(qmode: str | None, seed: int = 0, n_layers: int = PARAMS["n_layers"]):
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.examples.models.llama.source_transformation.custom_kv_cache import (
        replace_kv_cache_with_custom_kv_cache,
    )
    from executorch.examples.models.llama.source_transformation.sdpa import replace_sdpa_with_custom_op

    torch.manual_seed(seed)
    args = ModelArgs(**{**PARAMS, "n_layers": n_layers}, max_seq_len=MAX_SEQ_LEN, max_context_len=MAX_SEQ_LEN,
                     use_kv_cache=True, use_sdpa_with_kv_cache_op=True, enable_dynamic_shape=True)
    model = construct_transformer(args)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02 if p.dim() > 1 else 0.1)
    model.eval()
    # export_llama's order for -kv --use_sdpa_with_kv_cache: custom sdpa first, then the custom KV cache
    model = replace_sdpa_with_custom_op(model)
    model = replace_kv_cache_with_custom_kv_cache(model)
    if qmode is not None:
        from executorch.examples.models.llama.source_transformation.quantize import quantize

        model = quantize(model, qmode, group_size=32)
    tokens = torch.randint(0, PARAMS["vocab_size"], (1, PROMPT), generator=torch.Generator().manual_seed(seed))
    return _Method(model).eval(), (tokens, torch.tensor([0], dtype=torch.long))


def tiny_llama():
    """fp32 Llama with the KV cache and custom sdpa ops (as ``export_llama -kv --use_sdpa_with_kv_cache``)."""
    return _build(None)


def tiny_llama_8da4w():
    """The same Llama, 8da4w-quantized by ExecuTorch's own ``quantize`` (as ``export_llama -qmode 8da4w -G 32``)."""
    return _build("8da4w")


def tiny_llama_8da4w_1layer():
    """:func:`tiny_llama_8da4w` with one layer (the tests' size: lowering 8da4w dominates their time)."""
    return _build("8da4w", n_layers=1)
