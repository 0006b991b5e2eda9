"""Small functions shared by subcommands: parser construction and output writing."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_command", "add_global_flags", "write_text"]


def add_global_flags(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """``--debug`` and ``-v/--verbose`` on ``parser`` (on subparsers too, so ``etlens report --debug`` works).

    ``suppress``: a subparser's flags default to "not given", so the top-level value is kept.
    """
    default = argparse.SUPPRESS if suppress else False
    parser.add_argument("--debug", action="store_true", default=default,
                        help="show full tracebacks on errors")
    parser.add_argument("-v", "--verbose", action="store_true", default=default,
                        help="show third-party warnings and native log lines (hidden by default)")


def add_command(sub, name: str, help: str, example: str, description: str | None = None) -> argparse.ArgumentParser:
    """Add a subcommand parser whose epilog shows a real example."""
    parser = sub.add_parser(
        name,
        help=help,
        description=description or help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    add_global_flags(parser, suppress=True)
    return parser


def write_text(text: str, out: str | None) -> None:
    """Write ``text`` to ``out`` (a path) or to stdout when ``out`` is None or '-'."""
    if out in (None, "-"):
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
