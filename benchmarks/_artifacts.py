"""Build (once) and cache the big artifacts the benchmarks compare on.

``deep_artifacts(layers=1000, runs=10)`` lowers ``etlens.demos.deep_mlp(layers)`` with portable
kernels (every operator logs its own ETDump events), writes ``.pte``, ``.etrecord`` (with
representative inputs), runs it ``runs`` times with ETDump and a debug buffer, and returns the
paths. Results are cached in ``benchmarks/.cache/deep<layers>_r<runs>/``; building the
1000-layer model takes a few minutes the first time.

    python benchmarks/_artifacts.py 1000 10
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "src"))


def deep_artifacts(layers: int = 1000, runs: int = 10, delegate: bool = False) -> SimpleNamespace:
    tag = f"deep{layers}_r{runs}{'_xnn' if delegate else ''}"
    out = os.path.join(HERE, ".cache", tag)
    paths = SimpleNamespace(**{k: os.path.join(out, f"{tag}{ext}") for k, ext in (
        ("pte", ".pte"), ("etrecord", ".etrecord"), ("etdump", ".etdp"), ("debug_buffer", ".debug.bin"))})
    if all(os.path.exists(p) for p in vars(paths).values()):
        return paths
    os.makedirs(out, exist_ok=True)
    import generate  # tests/fixtures/generate.py

    from etlens.demos import deep_mlp

    model, inputs = deep_mlp(layers)
    _, _, et = generate.lower(model, inputs, delegate=delegate)
    with open(paths.pte, "wb") as f:
        f.write(et.buffer)
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(paths.etrecord)
    generate.run_with_etdump(et.buffer, inputs, runs, paths.etdump, paths.debug_buffer,
                             debug_buffer_size=64 << 20)
    return paths


if __name__ == "__main__":
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    print(deep_artifacts(layers, runs))
