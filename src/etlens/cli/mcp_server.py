"""The tools of ``etlens mcp``: each runs its etlens command with ``--format json -o FILE`` in a child
process and returns that file's JSON, so an agent gets exactly what the command line writes.

A child per call keeps the server's stdout (the MCP channel) clean of anything a build prints,
and a native abort inside a lowering from taking the server down. Tools:

* ``doctor`` — findings with fixes (``etlens doctor``; the document of ``schema/doctor.schema.json``);
* ``report`` — the HTML report (``etlens report``); returns its path and headline numbers;
* ``gap`` — the per-op numeric gap (``etlens gap``);
* ``fix`` — the keep-in-float recipe (``etlens fix --quantize``);
* ``diff`` — what changed between two programs (``etlens diff A B``).

Works with the ``mcp`` package 1.x (``FastMCP``) and 2.x (``MCPServer``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

__all__ = ["TOOLS", "tool_specs", "call", "argv_for", "serve"]

#: tool -> (etlens command, what it does)
TOOLS = {
    "doctor": ("doctor", "Findings with fixes for a model (model='file.py:build', backend, quantize, verify) or a "
                         "device run (etdump, etrecord, pte): rule, severity, module_paths, evidence, estimated_win "
                         "{ms|bytes|db}, fix, verify_command, sorted by estimated win; verify=true applies the fixes "
                         "a build can apply and adds verified {before, after}."),
    "report": ("report", "Write the offline HTML report of a model or a device run to output (default report.html); "
                         "returns its path and headline numbers (latency, delegated share, worst gap)."),
    "gap": ("gap", "Per-operator numeric gap between the runtime's intermediate outputs and the reference "
                   "(model=… or etdump + etrecord + debug_buffer)."),
    "fix": ("fix", "Keep-in-float recipe for an int8 model (model=…): culprits by introduced error, candidates "
                   "re-lowered and measured (SNR, latency, bytes)."),
    "diff": ("diff", "What changed between two programs (.pte) or ETRecords / traces: a and b are paths."),
}

_FLAGS = {"model", "demo", "etdump", "etrecord", "pte", "debug_buffer", "backend", "runs", "metric", "target_snr",
          "max_float", "max_lowerings", "work_dir", "title", "method", "fail_on"}
_SWITCHES = {"quantize", "verify", "no_profile_overhead", "no_trace", "no_inside_delegates"}


def argv_for(tool: str, args: dict[str, Any], out: str) -> list[str]:
    """The command line of ``tool`` with ``args`` (``{"model": "m.py:build", "quantize": true}``)."""
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}; tools: {', '.join(TOOLS)}")
    cmd = [TOOLS[tool][0]]
    args = dict(args)
    if tool == "diff":
        cmd += [str(args.pop("a")), str(args.pop("b"))]
    if tool == "fix":
        args.setdefault("quantize", True)
    for key, value in args.items():
        if value is None or value is False or key == "output":
            continue
        if key in _SWITCHES:
            cmd.append(f"--{key.replace('_', '-')}")
        elif key in _FLAGS:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
        else:
            raise ValueError(f"{tool}: unknown argument {key!r}")
    if tool == "report":
        return cmd + ["-o", str(args.get("output") or "report.html")]
    return cmd + ["--format", "json", "-o", out]


def call(tool: str, args: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
    """Run ``tool`` in a child ``python -m etlens`` and return its JSON document (errors as ``{"error": …}``)."""
    with tempfile.TemporaryDirectory(prefix="etlens-mcp-") as tmp:
        out = os.path.join(tmp, "out.json")
        argv = argv_for(tool, args, out)
        proc = subprocess.run([sys.executable, "-m", "etlens", *argv], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
        if tool == "report":
            return _report_result(argv, proc)
        if proc.returncode not in (0, 3) or not os.path.exists(out):
            return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"],
                    "exit_status": proc.returncode, "command": "etlens " + " ".join(argv)}
        with open(out, encoding="utf-8") as f:
            doc = json.load(f)
    if proc.returncode == 3 and isinstance(doc, dict):
        doc = {**doc, "gate_failed": True}
    return doc


def _report_result(argv: list[str], proc: Any) -> dict[str, Any]:
    path = os.path.abspath(argv[argv.index("-o") + 1])
    lines = [ln for ln in (proc.stdout or "").splitlines() if ln.startswith("wrote ")]
    res = {"path": path if os.path.exists(path) else None, "exit_status": proc.returncode,
           "summary": lines[-1] if lines else None}
    if proc.returncode not in (0, 3):
        res["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    return res


def tool_specs() -> list[dict[str, str]]:
    """``[{"name", "command", "description"}]`` of the tools."""
    return [{"name": k, "command": f"etlens {v[0]}", "description": v[1]} for k, v in TOOLS.items()]


def _server() -> Any:
    try:
        from mcp.server.mcpserver import MCPServer as Server  # mcp 2.x
    except ImportError:
        from mcp.server.fastmcp import FastMCP as Server  # mcp 1.x
    server = Server("etlens")

    @server.tool(name="doctor", description=TOOLS["doctor"][1])
    def doctor(model: str | None = None, etdump: str | None = None, etrecord: str | None = None,
               pte: str | None = None, debug_buffer: str | None = None, backend: str | None = None,
               quantize: bool = False, runs: int | None = None, verify: bool = False,
               no_profile_overhead: bool = False, fail_on: str | None = None) -> str:
        return _text(call("doctor", locals()))

    @server.tool(name="report", description=TOOLS["report"][1])
    def report(output: str = "report.html", model: str | None = None, etdump: str | None = None,
               etrecord: str | None = None, pte: str | None = None, debug_buffer: str | None = None,
               backend: str | None = None, quantize: bool = False, runs: int | None = None) -> str:
        return _text(call("report", locals()))

    @server.tool(name="gap", description=TOOLS["gap"][1])
    def gap(model: str | None = None, etdump: str | None = None, etrecord: str | None = None,
            debug_buffer: str | None = None, backend: str | None = None,
            quantize: bool = False, metric: str | None = None) -> str:
        return _text(call("gap", locals()))

    @server.tool(name="fix", description=TOOLS["fix"][1])
    def fix(model: str, backend: str | None = None, target_snr: float | None = None,
            max_float: int | None = None, max_lowerings: int | None = None) -> str:
        return _text(call("fix", locals()))

    @server.tool(name="diff", description=TOOLS["diff"][1])
    def diff(a: str, b: str) -> str:
        return _text(call("diff", locals()))

    return server


def _text(doc: Any) -> str:
    from .emit import dumps

    return dumps(doc)


def serve() -> None:
    """Serve the tools over stdio until the client closes the connection."""
    _server().run("stdio")
