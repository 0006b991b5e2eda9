"""An activation culprit fixed on the real XNNPACK lowering: ``fix_model`` end to end on a 6-layer MLP.

``layers.2`` outputs one channel near 1000 that ``layers.3`` ignores: the per-tensor int8 scale of
that activation crushes every other channel. Keeping ``layers.2`` alone in float removes
nothing (``layers.3`` quantizes the outlier again at its input). The recipe names the culprit and its
consumer ``layers.3`` and, lowered to XNNPACK and run on the ExecuTorch runtime,
the output SNR rises from the int8 build's (measured 2.8 dB) to near float (measured 34.8 dB).
Two lowerings (the int8 build and the chosen set).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")

from culprits import make_case  # noqa: E402

pytestmark = [pytest.mark.executorch]


def test_activation_culprit_fixed_on_xnnpack(tmp_path):
    from etlens.analysis.fix import fix_model
    from etlens.builder.session import BuildSession

    model, inputs, culprits = make_case("mlp_act", 0)
    with BuildSession(model, inputs, backend="xnnpack", quantize=True) as s:
        res = fix_model(s, str(tmp_path), max_lowerings=2, runs=1)
    assert res.culprits[0].module_path == culprits[0]
    c = int(culprits[0].split(".")[1])
    assert res.recipe.keep_float == [culprits[0], f"layers.{c + 1}"]  # the culprit and its consumer
    assert res.lowerings == 2
    int8 = next(c for c in res.candidates if not c.keep_float)
    chosen = next(c for c in res.candidates if c.chosen)
    assert int8.lowered and chosen.lowered, (int8.error, chosen.error)
    assert int8.snr_db < 10, int8.snr_db
    assert chosen.snr_db > 25 and chosen.snr_db > int8.snr_db + 15, (int8.snr_db, chosen.snr_db)
    assert chosen.mse < 0.05 * int8.mse
    # the runtime agrees with the PyTorch simulation of the same recipe
    assert abs(chosen.snr_db - chosen.simulated_snr_db) < 3.0, (chosen.snr_db, chosen.simulated_snr_db)
