"""Small helpers shared by subcommands: parser construction and output writing."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_command", "write_text"]


def add_command(sub, name: str, help: str, example: str, description: str | None = None) -> argparse.ArgumentParser:
    """Add a subcommand parser whose epilog shows a real example."""
    return sub.add_parser(
        name,
        help=help,
        description=description or help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def write_text(text: str, out: str | None) -> None:
    """Write ``text`` to ``out`` (a path) or to stdout when ``out`` is None or '-'."""
    if out in (None, "-"):
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
