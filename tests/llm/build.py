"""Build the LLM corpus: tiny random-weight Llamas exported by ExecuTorch's own ``export_llama`` and run.

``python tests/llm/build.py OUT_DIR [case ...]`` writes, per case, ``OUT_DIR/<case>/`` with

- ``model.pte`` and ``etrecord.bin`` from ``python -m executorch.examples.models.llama.export_llama``
  (``-kv --use_sdpa_with_kv_cache -X --generate_etrecord``: XNNPACK, KV cache with the custom
  ``llama::update_cache`` / ``llama::custom_sdpa`` ops, metadata methods next to ``forward``);
- ``model.etdp`` and ``model.debug.bin`` from the real runtime (pybindings): a prefill, decode steps,
  then every metadata method, with ETDump and a debug buffer (intermediate outputs);
- ``model.profile.etdp``: the same session again without a debug buffer (timings only: the dump
  ExecuTorch's own Inspector reads; it asserts on intermediate outputs that differ between runs);
- ``export.log`` / ``run.log`` with the third-party output,

and merges ``OUT_DIR/manifest.json``: ``{case: {...}}`` with the file names (relative to OUT_DIR),
the params, the export flags, and ``calls``: every method call in runtime order, with its inputs
(``tokens``: the token ids, ``n_tokens``, ``input_pos``), its ``phase`` (``prefill`` / ``decode`` /
``metadata``) and, for metadata methods, the value returned. Tests take the truth from there.

Both steps run in child processes (the runtime aborts on some errors; the export imports a lot).
A static-shape export (``--disable_dynamic_shape``) takes one token per call, so its prefill is
token by token: several ``forward`` calls labelled ``prefill`` with ``n_tokens == 1``.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tests.llm.export_llama import (KV_SDPA_XNNPACK, export_llama, export_then_run, program_loader, save_checkpoint,
                                    script_main, seeded_state_dict)

#: case -> params.json, extra export flags, prompt length, decode steps. Keep each case small:
#: the whole corpus builds in ~2-3 minutes on 2 idle cores (export 30-90 s per case, running ~10 s).
CASES: dict[str, dict] = {
    "fp32_dynamic": {
        "params": {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 256,
                   "multiple_of": 32, "norm_eps": 1e-5, "rope_theta": 10000.0},
        "flags": [],
        "max_seq_len": 32, "prompt": 5, "decode": 3,
    },
    "fp32_static": {
        "params": {"dim": 64, "n_layers": 1, "n_heads": 4, "n_kv_heads": 4, "vocab_size": 256,
                   "multiple_of": 32, "norm_eps": 1e-5, "rope_theta": 10000.0},
        "flags": ["--disable_dynamic_shape"],
        "max_seq_len": 24, "prompt": 4, "decode": 3,
    },
    "q8da4w_dynamic": {
        # one layer: XNNPACK's dynamically quantized partitioner takes minutes per layer on 2 busy cores
        "params": {"dim": 64, "n_layers": 1, "n_heads": 4, "n_kv_heads": 1, "vocab_size": 256,
                   "multiple_of": 32, "norm_eps": 1e-5, "rope_theta": 10000.0},
        "flags": ["-qmode", "8da4w", "-G", "32"],
        "max_seq_len": 32, "prompt": 6, "decode": 4,
    },
}

DEBUG_BUFFER_SIZE = 32 << 20


def export_child(case: str, d: str) -> None:
    """Write a seeded random checkpoint, then run ``export_llama`` on it (same process, as its CLI).

    Without ``--checkpoint`` export_llama keeps whatever memory ``to_empty`` left in the weights
    that have no ``reset_parameters`` (the RMSNorm scales): the program computes NaN. A
    checkpoint of a freshly constructed Transformer (ExecuTorch's own class) is what a user has.
    """
    spec = CASES[case]
    save_checkpoint(d, seeded_state_dict(spec["params"], spec["max_seq_len"], sum(map(ord, case))))
    export_llama(spec["max_seq_len"], [*KV_SDPA_XNNPACK, *spec["flags"]])


def run_child(case: str, d: str) -> None:
    """Child-process body: load ``model.pte`` with the real runtime, prefill, decode, metadata, ETDump.

    The same session runs twice: with a debug buffer (``model.etdp`` + ``model.debug.bin``: timings
    and intermediate outputs) and without (``model.profile.etdp``: timings only, the dump
    ExecuTorch's own Inspector can read -- it asserts on intermediate outputs that differ between
    prefill and decode runs). The calls of the first go to ``calls.json``.
    """
    load = program_loader(d)
    m = load(enable_etdump=True, debug_buffer_size=DEBUG_BUFFER_SIZE)
    calls = _session(m, case)
    m.write_etdump_result_to_file(os.path.join(d, "model.etdp"), os.path.join(d, "model.debug.bin"))
    m = load(enable_etdump=True)
    _session(m, case)
    m.write_etdump_result_to_file(os.path.join(d, "model.profile.etdp"))
    with open(os.path.join(d, "calls.json"), "w") as f:
        json.dump(calls, f, indent=1)


def _session(m, case: str) -> list[dict]:
    """Prefill (all at once, or token by token for a static-shape export), decode, every metadata method."""
    import torch

    spec = CASES[case]
    static = "--disable_dynamic_shape" in spec["flags"]
    g = torch.Generator().manual_seed(sum(map(ord, case)))
    prompt = torch.randint(1, spec["params"]["vocab_size"], (1, spec["prompt"]), generator=g)
    calls: list[dict] = []

    def forward(tokens: torch.Tensor, pos: int, phase: str) -> torch.Tensor:
        t0 = time.perf_counter_ns()
        out = m.run_method("forward", (tokens, torch.tensor([pos], dtype=torch.long)))
        calls.append({"method": "forward", "phase": phase, "tokens": tokens.flatten().tolist(),
                      "n_tokens": int(tokens.shape[1]), "input_pos": pos,
                      "wall_ns": time.perf_counter_ns() - t0})
        logits = out[0]
        if not bool(torch.isfinite(logits).all()):
            raise SystemExit(f"{case}: non-finite logits at input_pos {pos}")
        return logits if logits.dim() == 2 else logits[:, -1]

    if static:  # one token per call: the prefill is token by token
        for i in range(prompt.shape[1]):
            logits = forward(prompt[:, i:i + 1], i, "prefill")
    else:
        logits = forward(prompt, 0, "prefill")
    pos = prompt.shape[1]
    for _ in range(spec["decode"]):
        nxt = logits.argmax(-1).reshape(1, 1)  # greedy, as ExecuTorch's runner at temperature 0
        logits = forward(nxt, pos, "decode")
        pos += 1
    for name in sorted(m.method_names()):
        if name == "forward":
            continue
        value = m.run_method(name, ())
        v = value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value
        calls.append({"method": name, "phase": "metadata", "value": v if isinstance(v, (int, float, bool)) else str(v)})
    return calls


def build(out: str, case: str) -> dict:
    d = os.path.join(out, case)
    spec = CASES[case]
    seconds = export_then_run(__file__, case, d, spec["params"])
    with open(os.path.join(d, "calls.json")) as f:
        calls = json.load(f)
    rel = case + "/"
    return {
        "pte": rel + "model.pte", "etrecord": rel + "etrecord.bin", "etdump": rel + "model.etdp",
        "debug_buffer": rel + "model.debug.bin", "etdump_profile": rel + "model.profile.etdp",
        "params": spec["params"], "flags": spec["flags"],
        "dynamic_shape": "--disable_dynamic_shape" not in spec["flags"],
        "quantization": "8da4w" if "8da4w" in spec["flags"] else None,
        "max_seq_len": spec["max_seq_len"], "prompt_tokens": spec["prompt"], "decode_steps": spec["decode"],
        "calls": calls, "forward_runs": sum(c["method"] == "forward" for c in calls), "build_seconds": seconds,
    }


if __name__ == "__main__":
    script_main(sys.argv[1:], names=list(CASES), build=build, export_child=export_child, run_child=run_child)
