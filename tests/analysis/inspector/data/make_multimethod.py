"""Regenerate mm.etdp / mm.etrecord: a two-method program (forward: linear+relu, other: sin/cos/mul/add)
run as other, forward, other with ETDump enabled.  Usage: python make_multimethod.py [OUT_DIR]"""
import os
import sys

import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

class A(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.fc = torch.nn.Linear(8, 8)
    def forward(self, x): return torch.relu(self.fc(x))
class B(torch.nn.Module):
    def forward(self, x): return torch.sin(x) * 2 + torch.cos(x)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
x = (torch.randn(2, 8),)
eps = {"forward": torch.export.export(A(), x), "other": torch.export.export(B(), x)}
edge = to_edge_transform_and_lower(eps, generate_etrecord=True)
et = edge.to_executorch()
open(OUT + "/mm.pte", "wb").write(et.buffer)
rec = et.get_etrecord(); rec.save(OUT + "/mm.etrecord")
m = _load_for_executorch_from_buffer(et.buffer, enable_etdump=True, debug_buffer_size=1 << 16)
m.run_method("other", list(x)); m.run_method("forward", list(x)); m.run_method("other", list(x))
m.write_etdump_result_to_file(OUT + "/mm.etdp", OUT + "/mm.debug.bin")
print("ok")
