"""etlens' per-op numerics inside QNN against ExecuTorch's own QNNIntermediateDebugger (the reference).

The corpus builder runs the debugger on each dump with the live edge program (it needs the layout
metadata the saved ETRecord drops) and stores its per-op MSE; etlens reads the same files alone.
"""

from __future__ import annotations

import pytest

from .conftest import run_json

#: one worker builds the corpus while the other goes on (``--dist loadgroup``), instead of waiting on its lock
pytestmark = pytest.mark.xdist_group("qnn")


@pytest.mark.parametrize("case", ["dump_fp16", "dump_int8", "fault_int8"])
def test_per_op_mse_equals_the_qnn_intermediate_debugger(qnn_corpus, manifest, tmp_path, case):
    # a graph output's tensor is ``output_<node>@0``
    ref = {k.removeprefix("output_"): v for k, v in manifest["cases"][case]["reference_mse"].items()}
    code, doc = run_json(["gap", "--etdump", str(qnn_corpus / f"{case}.etdp"), "--etrecord",
                          str(qnn_corpus / f"{case}.etrecord"), "--debug-buffer", str(qnn_corpus / f"{case}.bin")],
                         tmp_path / "g.json")
    ours = {f"{r['node']}@0": r["gap"][0] for r in doc["rows"] if r["inside_delegate"]}
    both = sorted(set(ours) & {k for k in ref if "," not in k})
    assert len(both) >= 5, (sorted(ours), sorted(ref))
    for k in both:
        assert ours[k] == pytest.approx(ref[k], rel=1e-3, abs=1e-9), k
