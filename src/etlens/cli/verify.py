"""``etlens verify X.bpte``: run a bundled program's test cases in the ExecuTorch runtime (child process).

Exit status: 0 when every case matches its expected outputs, 3 (a failed gate) when one fails
(each failing case is named: method and index), 1 on an error (unreadable file, no runtime).
"""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_output, gate_failed

__all__ = ["register", "run"]


def register(sub) -> None:
    p = add_command(sub, "verify", "run every test case of a bundled program (.bpte) and compare outputs",
                    "etlens verify model.bpte --atol 1e-4 --rtol 1e-4")
    p.add_argument("bpte", help="bundled program written by executorch.devtools.bundled_program")
    p.add_argument("--atol", type=float, default=1e-3, help="absolute tolerance (default 1e-3)")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    add_output(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.bundled import verify_bundled

    res = verify_bundled(args.bpte, atol=args.atol, rtol=args.rtol)
    emit(args, doc=res, rows=res["cases"], text=lambda: _text(res, args))   # CSV/TSV: one row per test case
    failed = [f"{c['method']}[{c['index']}]" for c in res["cases"] if not c["passed"]]
    if failed:
        return gate_failed(f"{len(failed)} bundled test case(s) failed: {', '.join(failed)}")
    return EXIT_OK


def _text(res: dict, args) -> str:
    """One PASS/FAIL line per case and a count."""
    lines = []
    for c in res["cases"]:
        mad = "-" if c["max_abs_diff"] is None else f"{c['max_abs_diff']:.3g}"
        why = c.get("error") or c.get("detail") or ""
        lines.append(f"{'PASS' if c['passed'] else 'FAIL'}  {c['method']}[{c['index']}]  max_abs_diff {mad}"
                     + (f"  {why}" if why and not c["passed"] else ""))
    n_fail = sum(not c["passed"] for c in res["cases"])
    lines.append(f"{len(res['cases']) - n_fail}/{len(res['cases'])} cases passed (atol {args.atol}, "
                 f"rtol {args.rtol})")
    return "\n".join(lines)
