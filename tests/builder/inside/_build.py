"""Child process for the inside-delegates tests: run one case, write its JSON (``_build.py OUT CASE``).

Cases: ``fault_<mlp|cnn|transformer>`` (int8, SNR threshold 10) and ``<corpus name>_<fp32|int8>``.
Lowering and running happen here, never in the pytest process (a native abort fails one case).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))


def run(case: str) -> dict:
    from etlens.builder.inside import inside_delegates

    kind, _, variant = case.rpartition("_")
    if case.startswith("tap_"):
        return tap(variant)
    if case.startswith("fault_"):
        from tests.builder.inside.faults import BUILDERS

        model, inputs, path = BUILDERS[variant]()
        res = inside_delegates(model, inputs, quantize=True, metric="SNR", threshold=10, observe=False,
                               progress=False)
        return {"expected_module": path, **res.to_dict()}
    from tests.corpus import models

    model, inputs = getattr(models, kind)()
    res = inside_delegates(model, inputs, quantize=variant == "int8", metric="SNR", observe=False, progress=False)
    return res.to_dict()


def tap(name: str) -> dict:
    """Upstream's reference: ``tap_compare`` with STATS on every call_function node, fp32 XNNPACK."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools.intermediate_output_tap import tap_compare

    from tests.corpus import models

    model, inputs = getattr(models, name)()
    df, _specs = tap_compare(model, inputs, [XnnpackPartitioner()])
    return {"rows": df.astype(object).where(df.notna(), None).to_dict("records")}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for case in sys.argv[2:]:
        start = time.perf_counter()
        try:
            doc = run(case)
        except Exception as exc:  # noqa: BLE001 - one failing case must not stop the others
            doc = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        doc["seconds"] = time.perf_counter() - start
        (out / f"{case}.json").write_text(json.dumps(doc, default=str))
