"""``etlens mcp``: an MCP server (stdio) exposing doctor, report, gap, fix and diff to agents.

Each tool takes the same options as its command (as a JSON object: ``{"model": "m.py:build",
"quantize": true}``) and returns the command's ``--format json`` document (report: its headline
numbers and the page's path), so an agent gets exactly what ``etlens doctor --format json`` prints.
Needs the ``mcp`` package: ``pip install 'etlens[mcp]'``.

Register it with an MCP client (stdio)::

    {"mcpServers": {"etlens": {"command": "etlens", "args": ["mcp"]}}}
"""

from __future__ import annotations

from ._common import add_command
from .options import EXIT_OK

__all__ = ["register", "run"]


def register(sub) -> None:
    p = add_command(sub, "mcp", "an MCP server (stdio) with doctor, report, gap, fix and diff as tools (JSON results)",
                    "etlens mcp",
                    description="Serve etlens to agents over the Model Context Protocol on stdin/stdout: the tools "
                                "doctor, report, gap, fix and diff return the JSON their commands write with "
                                "--format json. Needs the mcp extra (pip install 'etlens[mcp]').")
    p.add_argument("--list-tools", action="store_true", help="print the tools and their arguments, then exit")
    p.set_defaults(func=run)


def run(args) -> int:
    import mcp  # noqa: F401 - missing: one line naming the extra (errors.INSTALL_HINTS)

    from . import mcp_server

    if args.list_tools:
        from .emit import dumps

        print(dumps(mcp_server.tool_specs()))
        return EXIT_OK
    mcp_server.serve()
    return EXIT_OK
