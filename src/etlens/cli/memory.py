"""``etlens memory X.pte``: planned memory per method and arena (sizes, lifetimes, peak, waste, overlaps)."""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_gate, add_output, gate_failed

__all__ = ["register", "run"]


def register(sub) -> None:
    p = add_command(sub, "memory", "planned memory of a .pte: arenas, tensor lifetimes, peak, waste, overlaps",
                    "etlens memory model.pte --etrecord model.etrecord --html memory.html")
    p.add_argument("pte", help="the .pte program")
    p.add_argument("--etrecord", help=".etrecord of the same program: names the ATen node and module of each tensor")
    add_output(p)
    p.add_argument("--html", metavar="FILE", help="also write the arena occupancy chart (offline HTML)")
    p.add_argument("--top", type=int, default=10, help="tensors listed per arena in the text output")
    p.add_argument("--method", help="only this method (e.g. 'forward' of an LLM program; default: every method)")
    add_gate(p, "sram-bytes", "Ethos-U programs: fail when the NPU scratch (SRAM) of every delegate plus the "
             "program's arena exceeds N bytes", metavar="N", type=int)
    add_gate(p, "flash-bytes", "Ethos-U programs: fail when the weights plus command streams (flash) exceed N bytes",
             metavar="N", type=int)
    from .memory_measure import add_measure_args

    add_measure_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.memory import analyze_memory, attach_etrecord
    from ..readers.pte import read

    report = analyze_memory(read(args.pte))
    if args.method:
        from ..errors import EtlensError

        kept = [m for m in report.methods if m.name == args.method]
        if not kept:
            raise EtlensError(f"{args.pte}: no method {args.method!r}; methods: "
                              f"{', '.join(m.name for m in report.methods)}")
        report.methods = kept
    if args.etrecord:
        from ..readers.etrecord import read as read_etrecord

        attach_etrecord(report, read_etrecord(args.etrecord))
    from ..views.memsize_text import format_memory

    doc = report.to_json()
    found = _backend_memory(args, doc)
    npu = next((facts for _, facts in found), None)  # the budget the SRAM/flash gates check
    measured = None
    if args.measure or args.fail_on_peak_bytes is not None:
        from .memory_measure import measure

        measured = measure(args, report, doc)

    def text() -> str:
        out = format_memory(report, args.top)
        for backend, facts in found:
            from ..backends import hook

            fmt = getattr(hook(backend, "text"), "format_memory", None)
            if fmt is not None:
                out += "\n" + fmt(facts)
        if measured is not None:
            from ..views.memory_measured import format_measured

            out += "\n" + format_measured(measured)
        return out

    # CSV/TSV: one row per planned tensor, every method and arena
    emit(args, doc=doc, rows=[{"method": m.name, **t.to_json()} for m in report.methods for t in m.tensors],
         text=text)
    if args.html:
        from ..views.memory_timeline import write_memory_html

        write_memory_html(report, args.html, measured=measured)
    if measured is not None:
        from .memory_measure import peak_gate

        failed = peak_gate(args, measured)
        if failed is not None:
            return failed
    return _gates(args, npu)


def _backend_memory(args, doc: dict) -> list:
    """``[(backend, facts)]`` from every backend whose ``memory`` hook reports on this program (Ethos-U:
    SRAM and flash from the Vela payloads), each stored as ``doc[backend.attrs_key]``."""
    from ..backends import hooks
    from ..readers.pte import read

    art, out = None, []
    for backend, memory in hooks("memory"):
        program_memory = getattr(memory, "program_memory", None)
        if program_memory is None:
            continue
        art = art or read(args.pte)
        facts = program_memory(art)
        if facts is not None:
            doc[backend.attrs_key] = facts
            out.append((backend, facts))
    return out


def _gates(args, npu: dict | None) -> int:
    checks = [("sram-bytes", args.fail_on_sram_bytes, "sram_with_arena_bytes", "SRAM (NPU scratch + arena)"),
              ("flash-bytes", args.fail_on_flash_bytes, "flash_with_command_stream_bytes",
               "flash (weights + command streams)")]
    for flag, limit, key, what in checks:
        if limit is None:
            continue
        if npu is None:
            from ..errors import EtlensError

            raise EtlensError(f"{args.pte}: --fail-on-{flag} needs an Ethos-U program, but the file has no "
                              "EthosUBackend delegate")
        if npu[key] is None:
            from ..errors import MissingDataError

            raise MissingDataError(f"{args.pte}: --fail-on-{flag}: the {what} is unknown: in Vela's "
                                   f"{npu.get('memory_mode')} memory mode the SRAM holds the fast scratch, which only "
                                   "the Vela sidecar (<stem>.vela.json, written by etlens's Ethos-U build) records")
        if npu[key] > limit:
            return gate_failed(f"{args.pte}: {what} is {npu[key]} bytes, over the {limit}-byte budget "
                               f"(--fail-on-{flag})")
    return EXIT_OK
