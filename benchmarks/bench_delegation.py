"""etlens vs ExecuTorch: delegation analysis, side by side on the same inputs.

1. In memory: ``deep_mlp(layers)`` lowered with the XNNPACK partitioner; ExecuTorch's
   ``get_delegation_info(gm)`` vs etlens' on the same ``GraphModule`` (results asserted equal).
2. From files: the cached 1000-layer portable artifacts (``_artifacts.deep_artifacts``):
   ExecuTorch ``parse_etrecord`` + ``get_delegation_info(edge program)`` vs etlens
   ``get_delegation_info(path)`` (both counting the recorded program), and etlens on the ``.pte``
   (ExecuTorch has no equivalent).

    python benchmarks/bench_delegation.py [layers_in_memory=200] [layers_files=1000]
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))


def _best(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _row(name: str, et: float | None, mine: float) -> None:
    ratio = f"{et / mine:6.1f}x" if et else "   n/a"
    et_s = f"{et:8.3f} s" if et is not None else "       - "
    print(f"{name:48s} executorch {et_s}   etlens {mine:8.3f} s   speed-up {ratio}")


def main(argv: list[str]) -> int:
    layers_mem = int(argv[0]) if argv else 200
    layers_files = int(argv[1]) if len(argv) > 1 else 1000
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools.backend_debug import get_delegation_info as et_info
    from executorch.devtools.etrecord import parse_etrecord
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.utils import format_delegated_graph as et_format

    from etlens.analysis import delegation as dl
    from etlens.demos import deep_mlp

    model, inputs = deep_mlp(layers_mem)
    t0 = time.perf_counter()
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    print(f"lowered deep_mlp({layers_mem}) with XNNPACK in {time.perf_counter() - t0:.1f} s")
    gm = edge.exported_program().graph_module
    t_et, ref = _best(lambda: et_info(gm))
    t_me, mine = _best(lambda: dl.get_delegation_info(gm))
    assert mine.get_summary() == ref.get_summary()
    assert mine.get_operator_delegation_dataframe().equals(ref.get_operator_delegation_dataframe())
    _row(f"get_delegation_info(gm), {layers_mem} layers", t_et, t_me)
    t_et, ref_text = _best(lambda: et_format(gm))
    t_me, text = _best(lambda: dl.format_delegated_graph(gm))
    assert text == ref_text
    _row("format_delegated_graph(gm)", t_et, t_me)

    from _artifacts import deep_artifacts

    paths = deep_artifacts(layers_files, 10)

    def et_file():
        return et_info(parse_etrecord(paths.etrecord).edge_dialect_program.graph_module)

    def me_file():
        dl.default_resolver.clear()  # time a cold read, not the cache
        return dl.get_delegation_info(paths.etrecord, etrecord_view="recorded")

    t_et, ref = _best(et_file, 1)
    t_me, mine = _best(me_file, 1)
    assert mine.get_summary() == ref.get_summary()
    _row(f".etrecord, {layers_files} layers (recorded program)", t_et, t_me)
    t_me, _ = _best(lambda: (dl.default_resolver.clear(), dl.get_delegation_info(paths.etrecord))[1], 1)
    _row(f".etrecord, {layers_files} layers (rebuilt lowered view)", None, t_me)
    t_me, info = _best(lambda: (dl.default_resolver.clear(), dl.get_delegation_info(paths.pte))[1], 1)
    _row(f".pte, {layers_files} layers ({info.num_non_delegated_nodes} kernel calls)", None, t_me)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
