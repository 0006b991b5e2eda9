"""The float source of a build: ExecuTorch's Llama definition, a checkpoint and its params.json, run in PyTorch.

``export_llama`` builds its program from ``--checkpoint`` + ``--params``; running the same
definition eagerly (``executorch.examples.models.llama``: plain PyTorch modules, no runtime) with
the checkpoint's weights gives the reference a build is compared with: next-token logits for every
position (``generate_full_logits``, no KV cache: one forward over the whole sequence is the same
causal computation as prefill + decode) and every module's output, caught with forward hooks and
keyed by the module path the build's ETRecord uses (``layers.2.feed_forward``).

Example::

    from etlens.analysis.llm_diff.eager import run_eager
    run = run_eager("checkpoint.pth", "params.json", tokens)
    run.logits.shape        # (len(tokens), vocab)
    run.activations["layers.0.attention"].shape   # (len(tokens), dim)
    greedy_eager("checkpoint.pth", "params.json", tokens, 16)   # 16 tokens decoded greedily after them

The rows each layer writes into its KV cache (RoPE's keys, ``wv``'s values: :mod:`.kv`) are hooked
too, under their module paths (``activations`` only; ``order`` lists the compared modules).

A quantized build's checkpoint is still the float checkpoint: compare an 8da4w ``.pte`` with this
to see what quantization did. The state dict is read with ``weights_only=True``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from ...errors import EtlensError, MissingDependencyError

__all__ = ["EagerRun", "run_eager", "greedy_eager", "module_order", "LAYER_MODULES"]

#: the sub-modules of a Llama block compared, in the order a block runs them
LAYER_MODULES = ("attention_norm", "attention", "ffn_norm", "feed_forward")


def module_order(n_layers: int) -> list[str]:
    """Module paths compared, in execution order: embedding, per layer its parts then the block, norm, head."""
    out = ["tok_embeddings"]
    for i in range(n_layers):
        out += [f"layers.{i}.{m}" for m in LAYER_MODULES] + [f"layers.{i}"]
    return out + ["norm", "output"]


@dataclass
class EagerRun:
    """``logits``: ``[positions, vocab]`` float32; ``activations``: module path -> ``[positions, ...]``."""

    logits: np.ndarray
    activations: dict[str, np.ndarray] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)


def _first_tensor(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


def load_params(path: str) -> dict[str, Any]:
    """The model's params.json (what ``export_llama --params`` read)."""
    try:
        with open(path, encoding="utf-8") as f:
            params = json.load(f)
    except OSError as exc:
        raise EtlensError(f"{path}: cannot read the params file ({exc.strerror})") from None
    except ValueError as exc:
        raise EtlensError(f"{path}: not a JSON params file ({exc})") from None
    if not isinstance(params, dict) or "dim" not in params:
        raise EtlensError(f"{path}: a Llama params.json needs at least 'dim' (and n_layers, n_heads, vocab_size)")
    return params


def _load_model(checkpoint: Optional[str], params: str | dict, n: int, state: Optional[dict]) -> tuple[Any, dict, Any]:
    """ExecuTorch's Llama with the checkpoint's weights, for sequences up to ``n`` tokens: (model, params, args)."""
    try:
        import torch
        from executorch.examples.models.llama.llama_transformer import construct_transformer
        from executorch.examples.models.llama.model_args import ModelArgs
    except ImportError as exc:
        raise MissingDependencyError(f"the float source needs ExecuTorch's Llama definition ({exc}); "
                                     "pip install 'etlens[executorch]'") from None
    p = dict(load_params(params) if isinstance(params, str) else params)
    known = set(ModelArgs.__dataclass_fields__)
    args = ModelArgs(**{k: v for k, v in p.items() if k in known},
                     **{"max_seq_len": max(n, int(p.get("max_seq_len", 0) or 0)),
                        "max_context_len": max(n, int(p.get("max_context_len", 0) or 0)),
                        "generate_full_logits": True, "use_kv_cache": False})
    if state is None:
        if checkpoint is None or not os.path.exists(checkpoint):
            raise EtlensError(f"{checkpoint}: checkpoint not found")
        try:
            state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint is the user's file
            raise EtlensError(f"{checkpoint}: not a torch.save-d state dict ({type(exc).__name__}: {exc})") from None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]
    model = construct_transformer(args)  # buffers (rope tables) are computed, weights come from the checkpoint
    missing, unexpected = model.load_state_dict(state, strict=False)
    if [m for m in missing if m in dict(model.named_parameters())] or unexpected:
        what = f"missing {sorted(missing)[:3]}" if missing else f"unexpected {sorted(unexpected)[:3]}"
        raise EtlensError(f"{checkpoint}: the checkpoint does not fit the params ({what}); give the params.json "
                          "the build was exported with")
    model.eval()
    return model, p, args


def greedy_eager(checkpoint: Optional[str], params: str | dict, prompt: Sequence[int], steps: int, *,
                 state: Optional[dict] = None, transform: Any = None) -> list[int]:
    """``steps`` tokens decoded greedily after ``prompt`` by the float model (the whole sequence per step)."""
    import torch

    model, _, _ = _load_model(checkpoint, params, len(prompt) + steps, state)
    if transform is not None:
        model = transform(model) or model
    seq = [int(t) for t in prompt]
    with torch.no_grad():
        for _ in range(steps):
            out = _first_tensor(model(torch.tensor([seq], dtype=torch.long)))
            seq.append(int(torch.argmax(out.reshape(len(seq), -1)[-1])))
    return seq[len(prompt):]


def run_eager(checkpoint: Optional[str], params: str | dict, tokens: Sequence[int], *, state: Optional[dict] = None,
              transform: Any = None) -> EagerRun:
    """Run the float model of ``checkpoint`` + ``params`` over ``tokens``; logits and module outputs per position.

    ``state``: a state dict to use instead of reading ``checkpoint`` (tests disturb one in memory);
    ``transform``: called with the loaded model before it runs (e.g. torchao's ``quantize_``, as
    ``export_llama -qmode`` does at source level).
    """
    import torch

    n = len(tokens)
    model, p, args = _load_model(checkpoint, params, n, state)
    if transform is not None:
        model = transform(model) or model
    from .kv import kv_path

    order = module_order(args.n_layers)
    named = dict(model.named_modules())
    acts: dict[str, Any] = {}
    hooks = []

    def keep(path: str, t: Any) -> None:
        if t is not None:
            acts[path] = t.detach().float().reshape(n, -1).numpy().copy()

    for path in order + [kv_path(i, "v") for i in range(args.n_layers)]:
        mod = named.get(path)
        if mod is not None:
            hooks.append(mod.register_forward_hook(lambda _m, _i, out, path=path: keep(path, _first_tensor(out))))
    # One Rope module is shared by every layer (so it has one name): its keys (second output) go to the
    # layer whose attention is running.
    current: list[int] = []
    for i in range(args.n_layers):
        att = named.get(f"layers.{i}.attention")
        if att is not None:
            hooks.append(att.register_forward_pre_hook(lambda _m, _i, i=i: current.append(i)))
    ropes = {id(m): m for p_, m in model.named_modules(remove_duplicate=False) if p_.endswith("rope.apply_rotary_emb")}

    def keys(_m: Any, _i: Any, out: Any) -> None:
        if current and isinstance(out, tuple):
            keep(kv_path(current[-1], "k"), out[1])

    hooks += [mod.register_forward_hook(keys) for mod in ropes.values()]
    try:
        with torch.no_grad():
            out = model(torch.tensor([list(tokens)], dtype=torch.long))
    finally:
        for h in hooks:
            h.remove()
    logits = _first_tensor(out).detach().float().reshape(n, -1).numpy()
    return EagerRun(logits=logits, activations=acts, order=[m for m in order if m in acts], params=p)
