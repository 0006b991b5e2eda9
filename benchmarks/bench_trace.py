"""Pass-tracer overhead: the XNNPACK pipeline traced by etlens vs the same pipeline run untraced.

The untraced side calls ExecuTorch directly, with no etlens code in the loop: ``torch.export``,
``to_edge_transform_and_lower`` (edge dialect), every pass of ``XNNPACKPassManager`` one at a time
(as the tracer runs them, under the class-only verifier XNNPACK's preprocess uses), then
``to_edge_transform_and_lower`` with ``XnnpackPartitioner``. The traced side is
``etlens.trace_passes(..., output=...)``: the same steps plus a graph snapshot, structural diff and
debug-handle report after each, and the JSON file. Goal: traced <= 1.3x untraced.

Runs alternate (untraced, traced, untraced, traced …) after one warm-up of each, and the best of
``--repeat`` is reported, as wall time and as process CPU time (steadier on a shared machine), plus the
tracer's own bookkeeping: the traced run's wall time minus the stages it timed.

    python benchmarks/bench_trace.py [--demos cnn transformer] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def untraced(model, inputs):
    import torch
    from executorch.backends.xnnpack._passes import XNNPACKPassManager
    from executorch.backends.xnnpack._passes.xnnpack_pass import XNNPACKPass
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.utils.configs import get_xnnpack_edge_compile_config
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.exir.program._program import _transform
    from executorch.exir.verification.verifier import EXIREdgeDialectVerifier

    config = get_xnnpack_edge_compile_config()
    ep = torch.export.export(model, inputs)
    program = to_edge_transform_and_lower(ep, compile_config=config).exported_program()
    verifiers = [EXIREdgeDialectVerifier(edge_compile_config=EdgeCompileConfig(_check_ir_validity=False),
                                         class_only=True)]
    for cls in XNNPACKPassManager(program).passes:
        p = cls(program) if issubclass(cls, XNNPACKPass) else cls()
        program = _transform(program, p, override_verifiers=verifiers)
    return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()], compile_config=config)


def traced(model, inputs, out):
    import etlens

    return etlens.trace_passes(model, inputs, backend="xnnpack", output=out, progress=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demos", nargs="+", default=["cnn", "transformer"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from etlens.demos import get_demo

    tmp = tempfile.mkdtemp(prefix="etlens-bench-trace-")
    rows = []
    for demo in args.demos:
        model, inputs = get_demo(demo)
        out = os.path.join(tmp, f"{demo}.json")
        untraced(model, inputs)  # warm-up: imports, op registries, pattern caches
        traced(model, inputs, out)
        best_u = best_t = best_uc = best_tc = best_book = float("inf")
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            untraced(model, inputs)
            best_u = min(best_u, time.perf_counter() - t0)
            best_uc = min(best_uc, time.process_time() - c0)
            t0, c0 = time.perf_counter(), time.process_time()
            trace = traced(model, inputs, out)
            wall = time.perf_counter() - t0
            best_t = min(best_t, wall)
            best_tc = min(best_tc, time.process_time() - c0)
            # the tracer's own work: everything outside the stages it times (snapshots, diffs, JSON)
            best_book = min(best_book, wall - sum(s.wall_time_s for s in trace.snapshots))
        rows.append((demo, len(trace.snapshots), sum(len(s.graph) for s in trace.snapshots),
                     os.path.getsize(out), best_u, best_t, best_uc, best_tc, best_book))
    print(f"{'demo':12} {'snapshots':>9} {'nodes':>6} {'json KB':>8} {'untraced s':>11} {'traced s':>9} "
          f"{'ratio':>6} {'untraced cpu s':>15} {'traced cpu s':>13} {'cpu ratio':>10} {'bookkeeping s':>14}")
    for demo, snaps, nodes, size, u, t, uc, tc, book in rows:
        print(f"{demo:12} {snaps:9d} {nodes:6d} {size / 1024:8.0f} {u:11.2f} {t:9.2f} {t / u:5.2f}x "
              f"{uc:15.2f} {tc:13.2f} {tc / uc:9.2f}x {book:14.2f}")
    print("goal: traced <= 1.3x untraced. Wall times swing with machine load (the pattern-matching passes "
          "dominate); CPU time and the tracer's bookkeeping (wall time outside the timed stages) are the "
          "steadier measures.")


if __name__ == "__main__":
    main()
