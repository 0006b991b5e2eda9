"""Which values are exposed, and the instrumented graph (torch only, no lowering)."""

from __future__ import annotations

import torch

from etlens.builder.inside.graph import capture, instrument, plan


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))          # linear folded into relu's row (fused activation)
        h = h.reshape(2, 8).contiguous()     # view-like: never exposed
        y = self.fc2(h)
        return y.softmax(-1), y.argmax(-1)   # argmax is not float: not exposed


def _gm():
    torch.manual_seed(0)
    m, x = Net().eval(), (torch.randn(2, 8),)
    return torch.export.export(m, x).module(), x


def test_plan_groups_and_skips():
    gm, _x = _gm()
    exps = plan(gm)
    assert [e.ops for e in exps] == [["linear", "relu"], ["linear_1"], ["softmax"]]
    assert exps[0].meta["module_path"] == "fc1" and exps[1].meta["module_path"] == "fc2"
    assert "test_plan.py" in exps[0].meta["source_line"]


def test_instrument_appends_values_and_reuses_outputs():
    gm, x = _gm()
    exps = plan(gm)
    inst, n_orig = instrument(gm, exps)
    assert n_orig == 2
    outs = inst(*x)
    # softmax is already output 0: reused, not appended twice
    assert [e.output_index for e in exps] == [2, 3, 0] and len(outs) == 4
    ref = capture(gm, x)
    for e in exps:
        torch.testing.assert_close(outs[e.output_index], ref[e.node])
