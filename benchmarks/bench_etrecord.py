"""ETRecord read time: etlens vs ExecuTorch's ``parse_etrecord`` on the 1000-layer program.

Usage::

    .venv/bin/python benchmarks/bench_etrecord.py [path.etrecord]

Prints, for the same file: ExecuTorch ``parse_etrecord`` (deserializes every program), etlens
``read`` + the edge-stage Graph (what the Inspector needs), etlens ``graphs()`` for all stages, and
etlens ``load_exported_program`` for both stages (runnable programs, what numerics needs).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))


def _time(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main(argv: list[str]) -> int:
    import warnings

    warnings.filterwarnings("ignore")
    if argv:
        path = argv[0]
    else:
        from _artifacts import deep_artifacts

        path = deep_artifacts().etrecord
    import torch  # noqa: F401  (import cost is not what we measure)
    import torch._export.serde.serialize  # noqa: F401
    from executorch.devtools.etrecord import parse_etrecord

    from etlens.readers.etrecord import read

    t_et, _ = _time(lambda: parse_etrecord(path))
    t_edge, rec = _time(lambda: read(path).graph("edge_dialect_exported_program/forward"))
    t_graphs, _ = _time(lambda: read(path).graphs())
    rec = read(path)
    t_eps, _ = _time(lambda: [rec.load_exported_program(s) for s in rec.stages])
    print(f"file: {path} ({os.path.getsize(path) / 1e6:.1f} MB)")
    print(f"ExecuTorch parse_etrecord (all programs):     {t_et:7.2f} s")
    print(f"etlens read + edge Graph:                     {t_edge:7.2f} s   ratio {t_et / t_edge:5.1f}x")
    print(f"etlens read + all Graphs:                     {t_graphs:7.2f} s   ratio {t_et / t_graphs:5.1f}x")
    print(f"etlens load_exported_program (all, runnable): {t_eps:7.2f} s   ratio {t_et / t_eps:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
