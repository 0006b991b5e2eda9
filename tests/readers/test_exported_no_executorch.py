"""The torch and ETRecord readers work with every ``executorch`` import blocked (a fresh process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(r"""
    import json, sys

    class Block:
        # a meta-path finder that refuses executorch, as if it were not installed
        def find_spec(self, name, path=None, target=None):
            if name == "executorch" or name.startswith("executorch."):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked for this test)")
            return None

    sys.meta_path.insert(0, Block())

    from etlens.readers import read
    out = {}
    for path in sys.argv[1:]:
        art = read(path)
        graphs = art.graphs()
        for g in graphs.values():
            g.lint()
        entry = {"format": art.format, "graphs": {k: len(g) for k, g in graphs.items()}}
        if art.format == "etrecord":
            inputs = art.representative_inputs[0]
            outs = []
            for stage in art.stages:
                ep = art.load_exported_program(stage)
                outs.append(ep.module()(*inputs))
            # the edge program may decompose differently (linear -> addmm): equal up to rounding
            entry["max_diff"] = max(float((o - outs[0]).abs().max()) for o in outs)
            entry["handles"] = {m: len(t) for m, t in art.debug_handle_map.items()}
            entry["edge_coverage"] = list(graphs["edge_dialect_exported_program/forward"].debug_handle_coverage())
        out[path] = entry
    assert not [m for m in sys.modules if m == "executorch" or m.startswith("executorch.")]
    print(json.dumps(out))
""")


def test_readers_without_executorch(committed):
    paths = [p for case in committed.values() for p in (case.etrecord, case.pt2)]
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT, *paths], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for case in committed.values():
        rec = out[case.etrecord]
        assert rec["format"] == "etrecord"
        assert list(rec["graphs"]) == ["exported_program", "edge_dialect_exported_program/forward"]
        assert rec["max_diff"] < 1e-5
        assert rec["handles"]["forward"] > 0
        covered, total = rec["edge_coverage"]
        assert total > 0 and covered == total
        assert out[case.pt2]["format"] == "pt2"
