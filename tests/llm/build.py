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
import subprocess
import sys
import time

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


def export(case: str, d: str) -> None:
    """Run ExecuTorch's export_llama for ``case`` in a child process, in ``d`` (see :func:`export_child`)."""
    spec = CASES[case]
    with open(os.path.join(d, "params.json"), "w") as f:
        json.dump(spec["params"], f)
    with open(os.path.join(d, "export.log"), "w") as log:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--export", case, d], cwd=d, stdout=log,
                              stderr=subprocess.STDOUT)
    if proc.returncode != 0 or not os.path.exists(os.path.join(d, "model.pte")):
        tail = open(os.path.join(d, "export.log")).read()[-3000:]
        raise SystemExit(f"export_llama failed for {case} (exit {proc.returncode}):\n{tail}")


def export_child(case: str, d: str) -> None:
    """Write a seeded random checkpoint, then run ``export_llama`` on it (same process, as its CLI).

    Without ``--checkpoint`` export_llama keeps whatever memory ``to_empty`` left in the weights
    that have no ``reset_parameters`` (the RMSNorm scales): the program computes NaN. A
    checkpoint of a freshly constructed Transformer (ExecuTorch's own class) is what a user has.
    """
    import runpy

    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    spec = CASES[case]
    torch.manual_seed(sum(map(ord, case)))
    model = construct_transformer(ModelArgs(**spec["params"], max_seq_len=spec["max_seq_len"]))
    torch.save(model.state_dict(), os.path.join(d, "checkpoint.pth"))
    n = str(spec["max_seq_len"])
    sys.argv = ["export_llama", "--params", "params.json", "-c", "checkpoint.pth", "-kv", "--use_sdpa_with_kv_cache",
                "-X", "--generate_etrecord", "--max_seq_length", n, "--max_context_length", n,
                "--output_name", "model.pte", "-d", "fp32", *spec["flags"]]
    runpy.run_module("executorch.examples.models.llama.export_llama", run_name="__main__")


def run(case: str, d: str) -> list[dict]:
    """Child-process body: load ``model.pte`` with the real runtime, prefill, decode, metadata, ETDump.

    The same session runs twice: with a debug buffer (``model.etdp`` + ``model.debug.bin``: timings
    and intermediate outputs) and without (``model.profile.etdp``: timings only, the dump
    ExecuTorch's own Inspector can read -- it asserts on intermediate outputs that differ between
    prefill and decode runs).
    """
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  registers llama::custom_sdpa & co.
    from executorch.extension.pybindings import portable_lib as pl

    with open(os.path.join(d, "model.pte"), "rb") as f:
        buf = f.read()  # keep a reference: the runtime reads the program from this buffer, it does not copy it
    m = pl._load_for_executorch_from_buffer(buf, enable_etdump=True, debug_buffer_size=DEBUG_BUFFER_SIZE)
    calls = _session(m, case)
    m.write_etdump_result_to_file(os.path.join(d, "model.etdp"), os.path.join(d, "model.debug.bin"))
    m = pl._load_for_executorch_from_buffer(buf, enable_etdump=True)
    _session(m, case)
    m.write_etdump_result_to_file(os.path.join(d, "model.profile.etdp"))
    return calls


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
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    export(case, d)
    t1 = time.time()
    with open(os.path.join(d, "run.log"), "w") as log:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--run", case, d], stdout=log,
                              stderr=subprocess.STDOUT, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        raise SystemExit(f"running {case} failed (exit {proc.returncode}):\n"
                         + open(os.path.join(d, "run.log")).read()[-3000:])
    with open(os.path.join(d, "calls.json")) as f:
        calls = json.load(f)
    spec = CASES[case]
    rel = case + "/"
    return {
        "pte": rel + "model.pte", "etrecord": rel + "etrecord.bin", "etdump": rel + "model.etdp",
        "debug_buffer": rel + "model.debug.bin", "etdump_profile": rel + "model.profile.etdp",
        "params": spec["params"], "flags": spec["flags"],
        "dynamic_shape": "--disable_dynamic_shape" not in spec["flags"],
        "quantization": "8da4w" if "8da4w" in spec["flags"] else None,
        "max_seq_len": spec["max_seq_len"], "prompt_tokens": spec["prompt"], "decode_steps": spec["decode"],
        "calls": calls, "forward_runs": sum(c["method"] == "forward" for c in calls),
        "build_seconds": {"export": round(t1 - t0, 1), "run": round(time.time() - t1, 1)},
    }


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--export":
        export_child(argv[1], argv[2])
        return
    if argv and argv[0] == "--run":
        case, d = argv[1], argv[2]
        calls = run(case, d)
        with open(os.path.join(d, "calls.json"), "w") as f:
            json.dump(calls, f, indent=1)
        return
    out, cases = argv[0], argv[1:] or list(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {sorted(CASES)}")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "manifest.json")
    for case in cases:
        entry = build(out, case)
        manifest = json.load(open(path)) if os.path.exists(path) else {}
        manifest[case] = entry
        with open(path, "w") as f:
            json.dump(manifest, f, indent=1)
        print(f"built {case} in {sum(entry['build_seconds'].values()):.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
