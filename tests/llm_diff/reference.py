"""The tests' own token-by-token run of an LLM ``.pte`` (ExecuTorch's pybindings, no etlens code).

``python tests/llm_diff/reference.py MODEL.pte TOKENS.txt OUT.npy [N OUT.json]`` feeds the tokens one
per call (``input_pos = i``; the KV-cache builds) and saves the ``[positions, vocab]`` logits; with
``N``, it then decodes ``N`` tokens greedily (argmax fed back at the next position) and writes them to
``OUT.json``. Runs in its own process: the runtime aborts the process on some errors.
"""

from __future__ import annotations

import sys

import numpy as np


def main(pte: str, tokens_path: str, out: str, steps: str = "0", gen_out: str = "") -> None:
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  llama::custom_sdpa / update_cache
    import executorch.kernels.quantized  # noqa: F401
    import torch
    from executorch.extension.pybindings import portable_lib as pl

    tokens = [int(t) for t in open(tokens_path).read().split()]
    with open(pte, "rb") as f:
        buf = f.read()
    m = pl._load_for_executorch_from_buffer(buf)
    rows = []
    for i, t in enumerate(tokens):
        out_ = m.run_method("forward", (torch.tensor([[t]], dtype=torch.long), torch.tensor([i], dtype=torch.long)))
        rows.append(out_[0].reshape(-1, out_[0].shape[-1])[-1].float().numpy())
    np.save(out, np.stack(rows))
    generated: list[int] = []
    for _ in range(int(steps)):
        generated.append(int(np.argmax(rows[-1])))
        out_ = m.run_method("forward", (torch.tensor([[generated[-1]]], dtype=torch.long),
                                        torch.tensor([len(tokens) + len(generated) - 1], dtype=torch.long)))
        rows.append(out_[0].reshape(-1, out_[0].shape[-1])[-1].float().numpy())
    if gen_out:
        import json

        with open(gen_out, "w") as f:
            json.dump(generated, f)


def token_stats(base: np.ndarray, new: np.ndarray) -> dict:
    """KLD and top-1 agreement the plain way (torch's kl_div), to check etlens' numbers against."""
    import torch

    lp = torch.log_softmax(torch.from_numpy(base).double(), -1)
    lq = torch.log_softmax(torch.from_numpy(new).double(), -1)
    kld = torch.nn.functional.kl_div(lq, lp, log_target=True, reduction="none").sum(-1)
    same = (lp.argmax(-1) == lq.argmax(-1)).double()
    return {"kld_mean": float(kld.mean()), "kld_max": float(kld.max()), "top1_agreement": float(same.mean()),
            "top1_same": int(same.sum())}


if __name__ == "__main__":
    main(*sys.argv[1:6])
