"""``etlens doctor``: findings with fixes — what to change, what it should buy, and how to check it.

Two ways in, as ``report``: a model (``--model F:build`` / ``--demo``, built, run and diagnosed; with
``--verify`` the fixes a build can apply are applied and measured) or a device run's files
(``--etdump`` + ``--etrecord`` + ``--pte``). ``--format json`` is the document described by the
package's ``etlens/schema/doctor.schema.json``; ``--fail-on SEVERITY`` exits 3 when a finding is that
severe or worse.
"""

from __future__ import annotations

from ._common import add_command
from .emit import emit, wants_data
from .options import EXIT_OK, add_backend, add_model_source, add_output, gate_failed, model_spec

__all__ = ["register", "run", "doctor_document"]

_COLUMNS = ["severity", "rule", "module_paths", "win", "title", "fix"]


def register(sub) -> None:
    from ..analysis.doctor.finding import SEVERITIES

    p = add_command(sub, "doctor", "findings with fixes: the rule, evidence, estimated win, fix and verify command",
                    "etlens doctor --model model.py:build --format json -o findings.json --verify",
                    description="Diagnose a model (built, run and profiled here) or a device run's files: each "
                                "finding names a rule, its severity, the modules, the evidence, the estimated win "
                                "(ms per run, bytes or dB), the fix in concrete terms and the etlens command that "
                                "verifies it; sorted by estimated win.")
    src = p.add_mutually_exclusive_group(required=True)
    add_model_source(src)
    src.add_argument("--etdump", metavar="D", help="ETDump from a device run (.etdp)")
    p.add_argument("--etrecord", metavar="R", help="ETRecord written at export (with --etdump)")
    p.add_argument("--pte", metavar="P", help="the program that ran (with --etdump)")
    p.add_argument("--debug-buffer", metavar="F", help="debug buffer with intermediate outputs (with --etdump)")
    add_backend(p, help="lowering target for --model/--demo")
    p.add_argument("--quantize", action="store_true", help="pt2e int8-quantize first (--model/--demo)")
    p.add_argument("--runs", type=int, default=5, help="runtime runs for --model/--demo (default 5)")
    p.add_argument("--verify", action="store_true",
                   help="apply the top fixes a build can apply (keep-in-float recipes) and measure them: each "
                        "finding gets verified {before, after}")
    p.add_argument("--no-profile-overhead", action="store_true",
                   help="skip measuring the ETDump overhead (two extra sets of runs)")
    p.add_argument("--work-dir", metavar="DIR", help="keep the build's files here (default: a temporary directory)")
    p.add_argument("--fail-on", choices=SEVERITIES, metavar="SEVERITY",
                   help=f"exit 3 when a finding is SEVERITY or worse ({', '.join(SEVERITIES)})")
    add_output(p)
    p.set_defaults(func=run)


def doctor_document(args) -> tuple[dict, object]:
    """Run the doctor for parsed ``args``; return ``(JSON document, DoctorResult)`` (the MCP server uses it)."""
    from .._progress import console
    from ..errors import EtlensError

    skip = ("profiling",) if args.no_profile_overhead else ()
    quiet = wants_data(args) and not args.output

    def say(stage: str) -> None:
        if getattr(args, "verbose", False) or not quiet:
            print(f"etlens doctor: {stage}", file=console())

    if args.etdump:
        if args.verify:
            raise EtlensError("--verify needs a model to rebuild (--model/--demo); a device run's files cannot be "
                              "re-lowered")
        if args.quantize or args.work_dir:
            raise EtlensError("--quantize and --work-dir go with --model/--demo, not with --etdump")
        from ..analysis.doctor.build import diagnose_artifacts

        res = diagnose_artifacts(args.etdump, etrecord=args.etrecord, pte=args.pte, debug_buffer=args.debug_buffer,
                                 skip=skip)
    else:
        for flag in ("etrecord", "pte", "debug_buffer"):
            if getattr(args, flag):
                raise EtlensError(f"--{flag.replace('_', '-')} goes with --etdump, not with --model/--demo")
        if args.runs < 1:
            raise EtlensError("--runs must be at least 1")
        from ..analysis.doctor.build import diagnose_session
        from ..builder.session import BuildSession

        spec = model_spec(args)
        model_args = f"--model {spec} --backend {args.backend}" + (" --quantize" if args.quantize else "")
        with BuildSession.load(spec, backend=args.backend, quantize=args.quantize,
                               verbose=getattr(args, "verbose", False)) as session:
            res = diagnose_session(session, model_args=model_args, runs=args.runs, verify=args.verify,
                                   work_dir=args.work_dir, skip=skip, on_stage=say)
    return res.to_json(), res


def run(args) -> int:
    doc, res = doctor_document(args)
    rows = [{"severity": f["severity"], "rule": f["rule"], "module_paths": ", ".join(f["module_paths"]) or "(root)",
             "win": _win(f["estimated_win"]), "title": f["title"], "fix": f["fix"]} for f in doc["findings"]]
    emit(args, doc=doc, rows=rows, columns=_COLUMNS, text=lambda: _text(doc))
    if args.fail_on:
        bad = res.at_least(args.fail_on)
        if bad:
            return gate_failed(f"{len(bad)} finding(s) at --fail-on {args.fail_on} or worse (top: {bad[0].rule} "
                               f"{bad[0].severity}: {bad[0].title})")
    return EXIT_OK


def _win(win: dict) -> str:
    if not win:
        return ""
    unit, value = next(iter(win.items()))
    if value is None:
        return ""
    return f"{value:,.0f} bytes" if unit == "bytes" else f"{value:.3g} {unit}"


def _text(doc: dict) -> str:
    from .emit import render_rows

    if not doc["findings"]:
        return "no findings: nothing to fix"
    lines = []
    rows = [(i + 1, f["severity"], f["rule"], ", ".join(f["module_paths"])[:40] or "(root)", _win(f["estimated_win"]),
             f["title"][:70]) for i, f in enumerate(doc["findings"])]
    lines.append(render_rows(["#", "severity", "rule", "module", "win", "finding"], rows, "table"))
    for i, f in enumerate(doc["findings"]):
        if f["severity"] == "info":
            continue
        lines.append(f"\n{i + 1}. [{f['severity']}] {f['rule']}: {f['title']}\n   fix: {f['fix']}\n"
                     f"   verify: {f['verify_command']}")
        v = f.get("verified")
        if v:
            lines.append(f"   verified: before {v.get('before')} after {v.get('after')} ({v.get('unit')})"
                         + ("" if v.get("applied") else f" - {v.get('note', '')}"))
    for n in doc.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)
