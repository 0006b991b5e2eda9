"""ExecuTorch's own numeric gap on an LLM corpus case, the reference for ``tests/llm/test_gap.py``.

``python tests/llm/et_reference.py JOBS.json`` (a child process: the runtime and ExecuTorch's devtools
import a lot, and the runtime may abort); ``JOBS.json`` is a list of ``{"pte", "etrecord", "out",
"tokens": [ids], "input_pos"}``, and for each job it

1. runs the ``.pte`` for the prefill call only (``tokens`` at ``input_pos``) with
   ETDump and a debug buffer: ``OUT_DIR/prefill.etdp`` + ``prefill.debug.bin``. ExecuTorch's
   Inspector asserts on the corpus' own prefill+decode dump (the runs' intermediate outputs
   differ), so this one-run dump is where ExecuTorch produces rows;
2. saves the inputs as ``OUT_DIR/prefill.inputs.pt`` (a tuple, for ``etlens gap --inputs``);
3. computes ``executorch.devtools.Inspector.calculate_numeric_gap("MSE")`` on it, giving the
   ETRecord those inputs (``export_llama`` records none), and writes ``OUT_DIR/executorch_gap.json``:
   ``[{"aot_debug_handle", "aot_ops", "runtime_ops", "gap"}]`` in ExecuTorch's row order (non-finite
   gaps as strings).
"""

from __future__ import annotations

import json
import math
import os
import sys


def main() -> None:
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    for job in jobs:
        one(job["pte"], job["etrecord"], job["out"], job["tokens"], job["input_pos"])


def one(pte: str, etrecord: str, out: str, tokens: list, pos: int) -> None:
    import torch

    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401 - llama::update_cache, custom_sdpa
    import executorch.kernels.quantized  # noqa: F401
    from executorch.extension.pybindings import portable_lib

    os.makedirs(out, exist_ok=True)
    inputs = (torch.tensor([[int(t) for t in tokens]], dtype=torch.long),
              torch.tensor([int(pos)], dtype=torch.long))
    torch.save(inputs, os.path.join(out, "prefill.inputs.pt"))
    with open(pte, "rb") as f:
        program = f.read()  # the runtime keeps pointing into this buffer: it must outlive the module
    module = portable_lib._load_for_executorch_from_buffer(program, enable_etdump=True, debug_buffer_size=32 << 20)
    module.run_method("forward", inputs)
    etdp, dbg = os.path.join(out, "prefill.etdp"), os.path.join(out, "prefill.debug.bin")
    module.write_etdump_result_to_file(etdp, dbg)

    from executorch.devtools import Inspector
    from executorch.devtools.etrecord import parse_etrecord

    record = parse_etrecord(etrecord)
    record._representative_inputs = [inputs]
    df = Inspector(etdump_path=etdp, etrecord=record, debug_buffer_path=dbg).calculate_numeric_gap("MSE")
    rows = [{"aot_debug_handle": [int(h) for h in r.aot_debug_handle], "aot_ops": list(r.aot_ops),
             "runtime_ops": list(r.runtime_ops),
             "gap": [float(g) if math.isfinite(float(g)) else str(float(g)) for g in r.gap]}
            for r in df.itertuples()]
    with open(os.path.join(out, "executorch_gap.json"), "w") as f:
        json.dump(rows, f)


if __name__ == "__main__":
    main()
