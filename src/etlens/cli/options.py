"""The command line's shared grammar: output format, model source, gate flags and exit codes.

Every subcommand builds its options from these functions, so the same idea is spelled the same way
everywhere:

* **output** — :func:`add_output` adds ``--format {table,csv,tsv,json}`` and ``-o/--output FILE``
  to every subcommand that prints data. ``table`` is for people (aligned columns), ``csv``/``tsv``
  are one header row and one row per item, ``json`` keeps every field. Old spellings still work as
  deprecated aliases: ``--json`` means ``--format json`` and ``--format text`` means ``--format table``.
  :func:`etlens.cli.emit.emit` renders a command's result in the asked format and writes it (one
  JSON style, one NaN policy); ``render_rows`` / ``render_records`` / ``flatten`` are re-exported from there.
* **model source** — :func:`add_model_source` adds ``--model FILE.py:FN`` (or ``package.module:FN``)
  and ``--demo [NAME]`` (see ``etlens demos``; a bare ``--demo`` is :data:`DEFAULT_DEMO` everywhere);
  :func:`add_backend` adds ``--backend NAME``, a name of the backend registry checked at parse time;
  artifacts are named by their own flags
  (``--etdump``, ``--etrecord``, ``--debug-buffer``, ``--pte``), the same on every subcommand.
* **gates** — :func:`add_gate` adds a ``--fail-on-<what>`` flag; :func:`gate_failed` prints one
  ``etlens: gate failed: …`` line and returns :data:`EXIT_GATE`.
* **exit status** — :data:`EXIT_OK` 0, :data:`EXIT_ERROR` 1, :data:`EXIT_USAGE` 2 (argparse's own
  code for a bad command line), :data:`EXIT_GATE` 3: the command worked and a gate failed, so CI can
  tell a regression from a typo. :func:`exit_codes_help` is the table ``etlens --help`` prints.

Example::

    p = add_command(sub, "size", ...)
    add_output(p)                      # --format {table,csv,tsv,json}, --json (deprecated), -o
    add_gate(p, "size-kb", "exit 3 when the file is larger than KB kibibytes", metavar="KB")
    ...
    emit(args, rows=(["part", "bytes"], rows))   # from .emit: --format and -o applied there
    return gate_failed("file is 912 KiB > --fail-on-size-kb 800") if too_big else EXIT_OK
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any

from .emit import flatten, render_records, render_rows

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_GATE", "EXIT_INTERRUPTED", "EXIT_CODES", "FORMATS",
           "DEFAULT_DEMO", "DEFAULT_BACKEND", "add_output", "add_model_source", "add_backend", "model_spec",
           "add_gate", "gate_failed", "exit_codes_help", "render_rows", "render_records", "flatten",
           "add_prompt_len"]

#: the command did what was asked
EXIT_OK = 0
#: an error: unreadable or inconsistent input, a failing model, a missing dependency (one ``etlens: error:`` line)
EXIT_ERROR = 1
#: a usage error: unknown option, missing or conflicting arguments (argparse exits with this code)
EXIT_USAGE = 2
#: the command worked and a gate failed (``--fail-on-…``, ``compare``'s regression, ``verify``'s failing case)
EXIT_GATE = 3
#: interrupted with Ctrl-C
EXIT_INTERRUPTED = 130

#: exit status -> meaning, as listed by ``etlens --help`` and docs/cli.md
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "error: bad or missing input, a failing model or stage, a missing optional dependency",
    EXIT_USAGE: "usage error: unknown option, missing or conflicting arguments",
    EXIT_GATE: "a gate failed: report/gap --fail-on-gap, report --fail-on-latency-ms,\n"
               "      compare --fail-on-regression (on by default), verify's failing test case",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}

#: the one set of output formats
FORMATS = ("table", "csv", "tsv", "json")
#: old spellings accepted on the command line (deprecated): value -> the format it means
FORMAT_ALIASES = {"text": "table"}


def exit_codes_help() -> str:
    """The ``exit status:`` block of ``etlens --help``."""
    return "exit status:\n" + "\n".join(f"  {code:<3} {text}" for code, text in EXIT_CODES.items())


def _format_value(text: str) -> str:
    value = text.strip().lower()
    return FORMAT_ALIASES.get(value, value)


class _JsonAlias(argparse.Action):
    """``--json``: the deprecated spelling of ``--format json``."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest="_json_alias", nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        namespace.format = "json"


def add_output(p: argparse.ArgumentParser, *, default: str = "table", output_help: str | None = None,
               with_output: bool = True) -> None:
    """``--format {table,csv,tsv,json}``, its deprecated aliases, and ``-o/--output FILE``.

    ``with_output=False`` when the subcommand's ``-o`` already means something else (a written file).
    """
    p.add_argument("--format", type=_format_value, choices=FORMATS, default=default,
                   help=f"output format (default {default}); 'text' is a deprecated alias of 'table'")
    p.add_argument("--json", action=_JsonAlias, help="deprecated alias of --format json")
    if with_output:
        p.add_argument("-o", "--output", metavar="FILE",
                       help=output_help or "write the output to FILE instead of stdout")


#: the demo ``--demo`` with no name builds, on every command (``etlens demos`` lists them all)
DEFAULT_DEMO = "cnn"
#: the backend ``--backend`` lowers to when not given, on every command
DEFAULT_BACKEND = "xnnpack"


def add_model_source(p: Any, *, model_help: str | None = None) -> None:
    """``--model FILE.py:FN`` and ``--demo [NAME]`` on ``p`` (a parser or an argument group).

    Give a mutually exclusive group to make them exclusive with other sources (``--etdump`` …).
    ``--model`` also accepts a demo name, so ``--model cnn`` equals ``--demo cnn``; a bare ``--demo``
    means :data:`DEFAULT_DEMO` on every command.
    """
    p.add_argument("--model", metavar="FILE.py:FN",
                   help=model_help or "a function returning (module, example_inputs), as path/to/file.py:FN or "
                                      "package.module:FN (a demo name works too)")
    p.add_argument("--demo", nargs="?", const=DEFAULT_DEMO, metavar="NAME",
                   help=f"a built-in demo model (default {DEFAULT_DEMO}); see `etlens demos`")


def _registry_names() -> list[str]:
    """The backend registry's names (the registry module imports nothing heavy: no torch, no ExecuTorch)."""
    import importlib

    for mod in ("etlens.builder.backends", "etlens.passes.backends"):
        try:
            return list(importlib.import_module(mod).backend_names())
        except ModuleNotFoundError as exc:
            if exc.name is None or not mod.startswith(exc.name):
                raise
    return []


def _backend_name(text: str) -> str:
    """argparse ``type`` of ``--backend``: a name of the backend registry, checked at parse time."""
    name = text.strip()
    names = _registry_names()
    if name not in names:
        raise argparse.ArgumentTypeError(f"unknown backend {name!r}; registered: {', '.join(names)} "
                                         "(see `etlens trace --list-backends`)")
    return name


def add_backend(p: Any, *, default: str = DEFAULT_BACKEND, help: str = "backend to lower to") -> None:
    """``--backend NAME``: a name of the backend registry (checked when the command line is parsed, without
    importing ExecuTorch), the same option on every command that lowers a model."""
    p.add_argument("--backend", type=_backend_name, default=default, metavar="NAME",
                   help=f"{help}: a registered backend ({', '.join(_registry_names())}; default {default})")


def _prompt_lens(text: str) -> list[int]:
    """argparse ``type`` of ``--prompt-len``: ``8`` or ``8,1,32`` -> positive token counts, checked at parse time."""
    from ..analysis.llm_phases import parse_prompt_lens
    from ..errors import EtlensError

    try:
        lens = parse_prompt_lens(text)
    except EtlensError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--prompt-len ")) from None
    if not lens:
        raise argparse.ArgumentTypeError(f"{text!r}: give the prompt's token count, or one per session separated "
                                         "by commas (e.g. 8 or 8,1,32)")
    return lens


def add_prompt_len(p: Any, help: str) -> None:
    """``--prompt-len N[,N...]``: an LLM's prompt length in tokens, one for every generate session or one per
    session in order (a list of ints in ``args.prompt_len``; a bad value is a usage error, exit 2)."""
    p.add_argument("--prompt-len", type=_prompt_lens, metavar="N[,N...]", help=help)


def model_spec(args: argparse.Namespace) -> str | None:
    """The model source given on the command line (``--model`` or ``--demo``), or None."""
    return getattr(args, "model", None) or getattr(args, "demo", None)


def add_gate(p: Any, what: str, help: str, *, metavar: str = "X", type: Any = float,
             aliases: Iterable[str] = (), dest: str | None = None) -> None:
    """A ``--fail-on-<what>`` gate flag (exit :data:`EXIT_GATE` when it trips).

    ``aliases``: older spellings kept working (shown as deprecated in ``--help``).
    """
    flags = [f"--fail-on-{what}", *aliases]
    note = f" (deprecated old spelling: {', '.join(flags[1:])})" if len(flags) > 1 else ""
    kw: dict[str, Any] = {"dest": dest} if dest else {}
    p.add_argument(*flags, type=type, metavar=metavar, help=f"{help}; exit status {EXIT_GATE}{note}", **kw)


def gate_failed(message: str) -> int:
    """Print ``etlens: gate failed: <message>`` where the user sees it and return :data:`EXIT_GATE`.

    (:func:`etlens._progress.console`: the real stderr, even while third-party output is kept quiet.)
    """
    from .._progress import console

    print(f"etlens: gate failed: {message}", file=console())
    return EXIT_GATE
