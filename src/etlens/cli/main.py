"""``etlens`` command line: one thin module per subcommand, registered in :data:`COMMANDS`.

Each subcommand module defines ``register(subparsers)`` which adds its parser (with an
example in its epilog) and sets ``func`` to a ``run(args) -> int`` function. Modules here must
stay light at import time: heavy libraries are imported inside ``run``.

Exit status (constants in :mod:`etlens.cli.options`, listed by ``etlens --help``): 0 ok; 1 an
error — an :class:`~etlens.errors.EtlensError` prints one line, anything else one line asking for a
bug report (``--debug`` shows the traceback); 2 a usage error (argparse); 3 a gate failed. Abbreviated options are
refused (``allow_abbrev=False`` everywhere), so ``--debug`` and ``-v`` work after any subcommand.

Quiet by default: while a command runs, stderr (third-party warnings, torch/torchao log lines,
native ``[cpuinfo_utils.cpp:…]`` lines) goes to a log file (:func:`etlens._progress.quiet`);
progress bars and etlens' own messages still reach the terminal. ``-v`` shows everything. On an
error after third-party output the one-line message names the kept log (in
``~/.local/state/etlens/logs``, see :func:`etlens._progress.log_dir`); an empty log is removed.

Run as the program (the ``etlens`` script, ``python -m etlens``), the process ends as soon as the
command is done: output flushed, exit handlers run, then ``os._exit`` — Python's own teardown of
a process that imported torch + ExecuTorch takes about 3 s of CPU and frees nothing the OS would
not. Called from Python (``main([...])``), :func:`main` returns its exit status as usual.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import INSTALL_HINTS, EtlensError, missing_dependency
from ._common import add_global_flags
from .options import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, exit_codes_help

__all__ = ["COMMANDS", "build_parser", "main"]

#: Subcommand modules, in the order ``etlens --help`` lists them.
COMMANDS = ["report", "info", "view", "inspect", "gap", "trace", "delegation", "model_explorer", "demos"]
COMMANDS += ["collect", "query", "compare"]  # fleet: datasets of many runs (etlens.fleet)
COMMANDS += ["memory", "size", "diff", "verify"]  # where the bytes go, program diff, bundled programs
COMMANDS += ["llm_diff"]  # two LLM builds token by token, down to the first divergent layer
COMMANDS += ["fix"]  # keep-in-float recipe: culprits by introduced error, candidates re-lowered
COMMANDS += ["doctor", "mcp"]  # findings with fixes, verified; the MCP server for agents


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    parser = argparse.ArgumentParser(
        prog="etlens",
        description="Make compiled PyTorch / ExecuTorch models understandable: graphs, passes, "
                    "device timings and numeric drift, from the files alone.",
        epilog="Start with: etlens report --demo -o report.html\n"
               "Every command that prints data takes --format {table,csv,tsv,json} and -o FILE.\n\n"
               + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"etlens {__version__}")
    add_global_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"etlens.cli.{name}")
        except Exception as exc:  # noqa: BLE001 - shown, never dropped: see _broken_command
            _broken_command(sub, name, exc)
            continue
        mod.register(sub)
    return parser


def _broken_command(sub: argparse._SubParsersAction, name: str, exc: Exception) -> None:
    """Register ``name`` as a visible entry that fails loudly: its module raised ``exc`` on import.

    ``etlens --help`` lists it as unavailable with the reason; running it exits 1 naming the error
    (``--debug`` re-raises it with the traceback). A subcommand never silently disappears.
    """
    reason = f"{type(exc).__name__}: {exc}"
    # no option prefix: whatever follows the command (even --help) reaches run() and its message
    p = sub.add_parser(name.replace("_", "-"), add_help=False, prefix_chars="\x00", allow_abbrev=False,
                       help=f"(unavailable: module etlens.cli.{name} failed to import: {reason})")
    p.add_argument("rest", nargs=argparse.REMAINDER)

    def run(args: argparse.Namespace) -> int:
        if args.debug:
            raise exc
        print(f"etlens: error: the {name.replace('_', '-')!r} command is broken: module etlens.cli.{name} failed "
              f"to import ({reason}); this is a bug or a broken install: rerun with --debug for the traceback",
              file=sys.stderr)
        return EXIT_ERROR

    p.set_defaults(func=run)


def _log_hint(exc: BaseException) -> str:
    log = getattr(exc, "etlens_log", None)
    return f" (third-party log: {log}; -v shows it live)" if log else ""


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    As the program's entry point (``argv`` not given, called from the ``__main__`` module of the
    ``etlens`` script or ``python -m etlens``) the process exits right after the command (see the
    module docstring).
    """
    code = _main(argv)
    if argv is None and _is_program_entry():
        exit_now(code)
    return code


def _is_program_entry() -> bool:
    caller = sys._getframe(2).f_globals.get("__name__")
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return caller == "__main__" and (script.startswith("etlens") or script == "__main__.py")


def exit_now(code: int) -> None:
    """End the process with ``code`` now: flush, run the exit handlers, skip the interpreter's teardown."""
    import atexit

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed or broken stream: nothing left to flush
            pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110
            pass
    os._exit(code)


def _main(argv: list[str] | None) -> int:
    from .._progress import quiet

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_OK
    try:
        with quiet(enabled=not args.verbose and not args.debug):
            return int(args.func(args) or EXIT_OK)
    except EtlensError as exc:
        if args.debug:
            raise
        dep = missing_dependency(exc)
        extra = f" (needs {dep}: {INSTALL_HINTS[dep]})" if dep and "pip install" not in str(exc) else ""
        print(f"etlens: error: {exc}{extra}{_log_hint(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("etlens: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the CLI never shows a bare traceback
        if args.debug:
            raise
        dep = missing_dependency(exc)
        if dep:  # an optional dependency is not installed: not a bug, say what to install
            print(f"etlens: error: etlens {args.command} needs {dep}, which is not installed: {INSTALL_HINTS[dep]}"
                  f"{_log_hint(exc)}", file=sys.stderr)
            return EXIT_ERROR
        print(f"etlens: internal error: {type(exc).__name__}: {exc} "
              f"(this is a bug in etlens: rerun with --debug and report the traceback){_log_hint(exc)}",
              file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
