"""Build the llm-diff corpus: 4-layer Llamas from one seeded checkpoint, exported by ExecuTorch's ``export_llama``.

``python tests/llm_diff/build.py OUT_DIR [case ...]`` writes, per case, ``OUT_DIR/<case>/`` with
``model.pte``, ``etrecord.bin`` (``--generate_etrecord``), ``checkpoint.pth``, ``params.json`` and
``export.log``, and merges ``OUT_DIR/manifest.json`` (``{case: {...}}``: file names relative to
OUT_DIR, the export flags, the checkpoint's seed and, for a planted fault, the disturbed layer).

The model is the phase corpus's (tests/llm/build_phases.py: its ``PARAMS``, ``MAX_SEQ_LEN`` and checkpoint
seed), so its two exports are this corpus's ``fp32`` (``-kv --use_sdpa_with_kv_cache -X``: the custom
``llama::update_cache`` / ``llama::custom_sdpa`` ops, dynamic shapes) and ``fp32_static``
(``--disable_dynamic_shape``: one token per call), built once for both corpora (tests/llm_diff/conftest.py
reads them from the phase corpus). This script builds the other two from the same checkpoint: ``q8``
(``-qmode 8da4w -G 32``) and ``fp32_nokv`` (no KV cache: the whole prefix per call). :func:`write_tokens`
draws the 64 seeded prompt tokens the tests feed.

Planted faults are made by the tests in the fp32 and q8 ``.pte`` files (``plant.py``): the base checkpoint
with one weight of one layer scaled; the layer, the weight (``attention.wq`` / ``attention.wo`` /
``feed_forward.w1`` / ``feed_forward.w2``) and the factor are drawn from the fault's seed (:func:`fault_of`),
so the truth is known per case. The export runs in a child process (it imports a lot, as export_llama's own
CLI): ~1 min of CPU (fp32) and ~3 min (8da4w) each.
"""

from __future__ import annotations

import os
import random
import sys
import time

from tests.llm.build_phases import MAX_SEQ_LEN, MODES, PARAMS
from tests.llm.build_phases import SEED as BASE_SEED
from tests.llm.export_llama import (KV_SDPA_XNNPACK, export_in_child, export_llama, save_checkpoint, script_main,
                                    seeded_state_dict, write_params)

KV = ["-kv", "--use_sdpa_with_kv_cache"]
Q8 = ["-qmode", "8da4w", "-G", "32"]
FAULT_WEIGHTS = ("attention.wq", "attention.wo", "feed_forward.w1", "feed_forward.w2")

#: case -> export flags (after the common ones) and the fault seed (None: the base checkpoint)
CASES: dict[str, dict] = {
    "fp32": {"flags": [*KV, "-X"], "fault": None},
    "q8": {"flags": [*KV, "-X", *Q8], "fault": None},
    "fp32_static": {"flags": [*KV, "-X", "--disable_dynamic_shape"], "fault": None},
    "fp32_nokv": {"flags": ["-X"], "fault": None},
    # No fault builds: the tests plant fp32 faults of seeds 0..9 in the fp32 .pte and the 8da4w fault
    # ``q8_fault0`` (seed 0: layers.3.feed_forward.w2 x2) in the q8 .pte (tests/llm_diff/plant.py: byte for
    # byte the export of the disturbed checkpoint), which saves an fp32 export (95 CPU-s) per fp32 seed and
    # an 8da4w export (~5 CPU-min) per run.
}


#: the cases the phase corpus exports (the same checkpoint and flags): case -> its shape mode there
FROM_PHASES = {"fp32": "dynamic", "fp32_static": "static"}
assert all(CASES[c]["flags"] == [*KV_SDPA_XNNPACK, *MODES[m]] for c, m in FROM_PHASES.items())


def fault_of(seed: int, n_layers: int = PARAMS["n_layers"]) -> dict:
    """The planted fault of ``seed``: which layer, which weight, and the factor it is scaled by."""
    rng = random.Random(seed)
    return {"layer": rng.randrange(n_layers), "weight": rng.choice(FAULT_WEIGHTS),
            "scale": rng.choice((2.0, 3.0, 0.25))}


def base_state_dict():
    """The seeded base checkpoint: a freshly constructed ExecuTorch ``Transformer``'s weights."""
    return seeded_state_dict(PARAMS, MAX_SEQ_LEN, BASE_SEED)


def disturbed(state: dict, fault: dict) -> dict:
    """``state`` with the fault's weight scaled (a copy; the base stays as it is)."""
    state = dict(state)
    key = f"layers.{fault['layer']}.{fault['weight']}.weight"
    state[key] = state[key] * fault["scale"]
    return state


def export_child(case: str, d: str) -> None:
    """Write the case's checkpoint, then run ``export_llama`` on it in this process (as its CLI does)."""
    spec = CASES[case]
    state = base_state_dict()
    if spec["fault"] is not None:
        state = disturbed(state, fault_of(spec["fault"]))
    save_checkpoint(d, state)
    export_llama(MAX_SEQ_LEN, spec["flags"])


def build(out: str, case: str) -> dict:
    d = os.path.join(out, case)
    os.makedirs(d, exist_ok=True)
    write_params(d, PARAMS)
    t0 = time.time()
    if not os.path.exists(os.path.join(d, "model.pte")):
        export_in_child(__file__, case, d)
    return {**entry(case, case + "/"), "export_seconds": round(time.time() - t0, 1)}


def entry(case: str, rel: str) -> dict:
    """The manifest entry of ``case`` whose files are in the directory ``rel`` (relative, ending in ``/``)."""
    spec = CASES[case]
    return {"pte": rel + "model.pte", "etrecord": rel + "etrecord.bin", "checkpoint": rel + "checkpoint.pth",
            "params_json": rel + "params.json", "params": PARAMS, "flags": spec["flags"],
            "kv_cache": "-kv" in spec["flags"], "dynamic_shape": "--disable_dynamic_shape" not in spec["flags"],
            "quantization": "8da4w" if "8da4w" in spec["flags"] else None,
            "fault": None if spec["fault"] is None else {"seed": spec["fault"], **fault_of(spec["fault"])},
            "max_seq_len": MAX_SEQ_LEN}


def write_tokens(out: str) -> None:
    """``OUT/tokens64.txt``: the 64 seeded prompt tokens."""
    rng = random.Random(BASE_SEED)
    with open(os.path.join(out, "tokens64.txt"), "w") as f:
        f.write(" ".join(str(rng.randrange(1, PARAMS["vocab_size"])) for _ in range(64)) + "\n")


if __name__ == "__main__":
    script_main(sys.argv[1:], names=[c for c in CASES if c not in FROM_PHASES], build=build, export_child=export_child)
