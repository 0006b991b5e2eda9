"""Child process of :mod:`etlens.analysis.bundled`: run every bundled test case in the ExecuTorch runtime.

``python -m etlens.analysis._bundled_child WORKDIR`` reads ``WORKDIR/program.pte`` and
``WORKDIR/cases.npz`` (arrays ``in_<s>_<c>_<k>`` plus ``cases.json`` listing them), runs each case
and appends one JSON line per case to ``WORKDIR/results.jsonl`` (outputs in ``out_<s>_<c>.npz``).
It runs in its own process so a native abort of the runtime cannot take etlens down; lines written
before a crash survive it.
"""

from __future__ import annotations

import json
import os
import sys


def main(work: str) -> int:
    import numpy as np
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    with open(os.path.join(work, "program.pte"), "rb") as f:
        program = f.read()  # kept alive: the runtime reads from this buffer without copying it
    module = _load_for_executorch_from_buffer(program)
    with open(os.path.join(work, "cases.json")) as f:
        cases = json.load(f)
    arrays = np.load(os.path.join(work, "cases.npz"))
    with open(os.path.join(work, "results.jsonl"), "a") as out:
        for case in cases:
            s, c = case["suite"], case["index"]
            inputs = []
            for k, spec in enumerate(case["inputs"]):
                if spec["kind"] == "tensor":
                    inputs.append(torch.from_numpy(arrays[f"in_{s}_{c}_{k}"]))
                else:
                    inputs.append(spec["value"])
            try:
                outs = module.run_method(case["method"], inputs)
            except Exception as exc:  # noqa: BLE001 - reported per case to the parent
                out.write(json.dumps({"suite": s, "index": c, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
                out.flush()
                continue
            saved = {}
            for k, o in enumerate(outs):
                saved[f"o{k}"] = o.detach().numpy() if hasattr(o, "detach") else np.asarray(o)
            np.savez(os.path.join(work, f"out_{s}_{c}.npz"), **saved)
            out.write(json.dumps({"suite": s, "index": c, "outputs": len(saved)}) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
