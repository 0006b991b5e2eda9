"""``etlens doctor`` on a device run's files (the committed tiny artifacts): the JSON contract, the
published schema, ``--fail-on``, the table; and the MCP server answering the ``mcp`` package's own
client with the same JSON as the command line.

Cheap: no build (the artifacts path), ~10 CPU-s plus one MCP server process.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from etlens.analysis.doctor import Finding, diagnose, schema, sort_findings
from etlens.analysis.doctor.context import DoctorContext
from etlens.analysis.doctor.finding import severity_for
from etlens.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "data"
KEYS = {"rule", "severity", "module_paths", "evidence", "estimated_win", "fix", "verify_command"}


def _artifacts(name: str) -> list[str]:
    return ["--etdump", str(DATA / f"{name}.etdp"), "--etrecord", str(DATA / f"{name}.etrecord"),
            "--pte", str(DATA / f"{name}.pte")]


@pytest.fixture(scope="module")
def cli_doc(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("doctor") / "doctor.json"
    assert main(["doctor", *_artifacts("mlp_xnnpack"), "--format", "json", "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_artifacts_contract_and_schema(cli_doc):
    import jsonschema

    jsonschema.validate(cli_doc, schema())
    assert cli_doc["latency_ms"] and cli_doc["latency_ms"] > 0
    for f in cli_doc["findings"]:
        assert KEYS <= set(f)
        assert len(f["estimated_win"]) == 1 and set(f["estimated_win"]) <= {"ms", "bytes", "db"}
    # a small MLP the delegate takes whole: nothing to fix
    assert [f for f in cli_doc["findings"] if f["severity"] != "info"] == []


def test_fail_on_exits_3(tmp_path, capsys):
    args = ["doctor", *_artifacts("mlp_xnnpack"), "--format", "json", "-o", str(tmp_path / "d.json")]
    assert main([*args, "--fail-on", "info"]) == 3  # the profiling-overhead note is info
    assert main([*args, "--fail-on", "low"]) == 0
    assert "gate failed" in capsys.readouterr().err


def test_table_names_each_finding(capsys):
    assert main(["doctor", *_artifacts("mlp_portable")]) == 0
    out = capsys.readouterr().out
    assert "profiling-overhead" in out and "severity" in out


def test_verify_needs_a_model():
    assert main(["doctor", *_artifacts("mlp_xnnpack"), "--verify"]) == 1


def test_sorted_by_win_info_last():
    fs = [Finding("a", "info", "x", score=0.9), Finding("b", "low", "y", score=0.02),
          Finding("c", "high", "z", score=0.5)]
    assert [f.rule for f in sort_findings(fs)] == ["c", "b", "a"]
    assert [severity_for(s) for s in (0.001, 0.02, 0.06, 0.3)] == ["info", "low", "medium", "high"]


def test_a_failing_rule_is_a_note_not_a_crash():
    import types

    def boom(ctx):
        raise RuntimeError("boom")

    Broken = types.ModuleType("etlens.analysis.doctor.broken")
    Broken.check = boom

    ctx = DoctorContext(etdump=str(DATA / "mlp_xnnpack.etdp"), pte=str(DATA / "mlp_xnnpack.pte"))
    res = diagnose(ctx, rules=[Broken])
    assert res.findings == [] and any("broken failed: RuntimeError: boom" in n for n in res.notes)


def _mcp_doctor(args: dict) -> tuple[list[str], str]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def go():
        params = StdioServerParameters(command=sys.executable, args=["-m", "etlens", "mcp"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                res = await session.call_tool("doctor", args)
                return tools, res.content[0].text
    return asyncio.run(go())


def test_mcp_server_answers_doctor_like_the_cli(cli_doc):
    pytest.importorskip("mcp")
    args = {"etdump": str(DATA / "mlp_xnnpack.etdp"), "etrecord": str(DATA / "mlp_xnnpack.etrecord"),
            "pte": str(DATA / "mlp_xnnpack.pte")}
    tools, text = _mcp_doctor(args)
    assert set(tools) == {"doctor", "report", "gap", "fix", "diff"}
    assert json.loads(text) == cli_doc


def test_report_opens_with_the_findings(tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", *_artifacts("mlp_xnnpack"), "-o", str(out)]) == 0
    page = out.read_text()
    sections = [page.index(f"<h2>{t}</h2>") for t in ("Findings", "Graph", "Delegation")]
    assert sections == sorted(sections)
    assert "nothing to fix" in page  # the clean MLP: no finding above info
