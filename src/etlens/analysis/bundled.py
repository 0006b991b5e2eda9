"""Run a bundled program's test cases in the ExecuTorch runtime and compare with the expected outputs.

:func:`verify_bundled` writes the embedded program and the inputs to a temporary directory and
runs them as the ``bundled-run`` job of an :class:`etlens.builder.worker.Worker`, a *child
process* (the ExecuTorch runtime may abort natively on a bad program; etlens must survive it and
say which case it was running). Each output is compared
with the expected one as ``numpy.allclose(actual, expected, rtol, atol)``; a case passes when
every output matches in shape and values. Cases the runtime could not run fail with the reason.

Example::

    from etlens.analysis.bundled import verify_bundled
    res = verify_bundled("model.bpte", atol=1e-5)
    [c for c in res["cases"] if not c["passed"]]
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ..errors import EtlensError, MissingDataError
from ..readers.bpte import BpteArtifact, read

__all__ = ["verify_bundled", "compare_outputs"]


def compare_outputs(actual: list[Any], expected: list[Any], atol: float, rtol: float) -> dict[str, Any]:
    """``{"passed", "max_abs_diff", "detail"}`` for one case's outputs."""
    import numpy as np

    if len(actual) != len(expected):
        return {"passed": False, "max_abs_diff": None,
                "detail": f"{len(actual)} outputs, {len(expected)} expected"}
    worst, detail = 0.0, ""
    passed = True
    for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            return {"passed": False, "max_abs_diff": None,
                    "detail": f"output {k}: shape {list(a.shape)}, expected {list(e.shape)}"}
        if a.size:
            d = np.abs(a.astype(np.float64) - e.astype(np.float64))
            worst = max(worst, float(np.nanmax(d)) if not np.isnan(d).all() else float("nan"))
        if not np.allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
            passed = False
            detail = detail or f"output {k} differs (max abs diff {worst:.6g} > atol {atol} + rtol {rtol}·|expected|)"
    return {"passed": passed, "max_abs_diff": worst, "detail": detail}


def verify_bundled(path: str | BpteArtifact, atol: float = 1e-3, rtol: float = 1e-3,
                   timeout: float = 600.0) -> dict[str, Any]:
    """Run every test case of a ``.bpte``; ``{"path", "cases": [{"method", "index", "passed", …}], "passed"}``."""
    import numpy as np

    art = path if isinstance(path, BpteArtifact) else read(path)
    try:
        import executorch.extension.pybindings.portable_lib  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means no runtime here
        raise MissingDataError(f"{art.path}: running bundled test cases needs the ExecuTorch runtime "
                               f"(pip install 'etlens[executorch]'): {exc}") from exc
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="etlens-bpte-") as work:
        with open(os.path.join(work, "program.pte"), "wb") as f:
            f.write(art.program_bytes())
        arrays: dict[str, Any] = {}
        cases = []
        for s, suite in enumerate(art.suites):
            for case in suite.cases:
                specs = []
                for k, v in enumerate(case.inputs):
                    if v.kind == "tensor":
                        arrays[f"in_{s}_{case.index}_{k}"] = v.array()
                    specs.append({"kind": v.kind, "value": v.value})
                cases.append({"suite": s, "index": case.index, "method": suite.method_name, "inputs": specs})
        np.savez(os.path.join(work, "cases.npz"), **arrays)
        with open(os.path.join(work, "cases.json"), "w") as f:
            json.dump(cases, f)
        from ..builder.worker import Worker

        crash = None
        try:
            with Worker() as worker:
                worker.bundled_run(work, timeout=timeout)
        except EtlensError as exc:  # a native abort or a timeout: the cases written before it count
            crash = str(exc)
        done: dict[tuple[int, int], dict[str, Any]] = {}
        rpath = os.path.join(work, "results.jsonl")
        if os.path.exists(rpath):
            with open(rpath) as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        done[(r["suite"], r["index"])] = r
        for s, suite in enumerate(art.suites):
            for case in suite.cases:
                entry: dict[str, Any] = {"method": suite.method_name, "index": case.index,
                                         "inputs": [v.describe() for v in case.inputs],
                                         "expected_outputs": [v.describe() for v in case.expected_outputs]}
                r = done.get((s, case.index))
                if r is None:
                    entry.update(passed=False, max_abs_diff=None, error=crash or "not run")
                elif "error" in r:
                    entry.update(passed=False, max_abs_diff=None, error=r["error"])
                else:
                    with np.load(os.path.join(work, f"out_{s}_{case.index}.npz")) as z:
                        actual = [z[f"o{k}"] for k in range(r["outputs"])]
                    expected = [v.array() for v in case.expected_outputs]
                    entry.update(compare_outputs(actual, expected, atol, rtol))
                results.append(entry)
    if not results:
        raise EtlensError(f"{art.path}: the bundled program has no test cases to run")
    return {"path": art.path, "atol": atol, "rtol": rtol, "passed": all(c["passed"] for c in results),
            "cases": results}
