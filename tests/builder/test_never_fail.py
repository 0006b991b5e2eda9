"""No optional stage takes the report down: the pass trace, the inside view, the numeric gap.

Each stage is made to fail (monkeypatched in this process, where ``main()`` runs): the report is
still written with everything else, the page and the terminal name the stage and why in one line,
the exit status is 0, and ``--strict`` makes it 1. The hints of a worker error match the flags
given (no "rerun with -v" when -v was given). The traced lowering of ExecuTorch's own Llama with the
llama custom ops (``llama::update_cache``, ``llama::custom_sdpa``: data-dependent sizes, unbacked
symbols) succeeds wherever the plain lowering does (marked slow: the tracer replays every XNNPACK
pass on the whole program).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import requires_executorch

STAGES = ("trace", "inside the delegates", "numeric gap")


def _break_every_optional_stage(monkeypatch) -> None:
    import importlib

    import etlens.builder.inside.race as race
    from etlens.builder.session import BuildSession

    collect = importlib.import_module("etlens.report.collect")  # the module (etlens.report.collect is a function)

    def no_trace(*_a, **_k):
        raise RuntimeError("snapshot store is read-only (made to fail)")

    def no_inside(*_a, **_k):
        raise RuntimeError("instrumented build refused (made to fail)")

    def no_gap(*_a, **_k):
        raise ValueError("reference outputs do not line up (made to fail)")

    monkeypatch.setattr(BuildSession, "_seed_job", no_trace)
    monkeypatch.setattr(race, "inside_for_session", no_inside)
    monkeypatch.setattr(collect, "_numerics", no_gap)


@requires_executorch
@pytest.mark.parametrize("strict", [pytest.param(False, marks=pytest.mark.slow), True])
def test_failed_optional_stages_leave_a_complete_report(tmp_path, monkeypatch, capsys, strict):
    from etlens.cli.main import main

    _break_every_optional_stage(monkeypatch)
    out = tmp_path / "r.html"
    code = main(["report", "--demo", "mlp", "--runs", "1", "-o", str(out), *(["--strict"] if strict else [])])
    err = capsys.readouterr().err
    assert code == (1 if strict else 0), err
    assert out.exists()
    page = out.read_text()
    for stage, why in zip(STAGES, ("snapshot store is read-only", "instrumented build refused",
                                   "reference outputs do not line up")):
        line = next((ln for ln in err.splitlines() if ln.startswith(f"etlens: warning: {stage} failed:")), None)
        assert line is not None and why in line, err  # one line on the terminal, with why
        assert f"{stage} failed (the rest of the report is complete)" in page and why in page
    assert ("--strict" in err) is strict
    # everything else is there: the program ran, latency and delegation are on the page
    arts = tmp_path / "r_artifacts"
    assert (arts / "mlp.pte").exists() and (arts / "mlp.etdp").exists()
    assert "Delegation" in page and "Per-operator latency" in page


def test_worker_hints_match_the_verbose_flag(tmp_path):
    """A failed job says "rerun with -v" only when -v was not given."""
    from etlens.builder.worker import Worker

    for verbose in (False, True):
        w = Worker(verbose=verbose)
        err = tmp_path / f"error{verbose}.json"
        err.write_text(json.dumps({"type": "RuntimeError", "message": "boom", "traceback": ""}))
        spec = {"job": "lower", "error": str(err), "result": str(tmp_path / "none.json")}
        exc = w._error({"stage": "lower", "backend": "xnnpack", "runs": None, "size": "none"}, spec, None, "", None)
        assert "boom" in str(exc)
        assert ("rerun with -v" in str(exc)) is (not verbose), str(exc)
        os.remove(err)
        crash = w._error({"stage": "trace:FuseBatchNormPass", "backend": "xnnpack", "runs": None, "size": "none"},
                         spec, -6, "", None)
        assert "lower crashed" in str(crash) and "--no-trace" in str(crash)
        assert ("rerun with -v" in str(crash)) is (not verbose), str(crash)
        w.close()


def tiny_llama_one_layer():
    """ExecuTorch's Llama with the KV cache and custom sdpa ops (``tests/llm/models.py:tiny_llama``), one layer:
    the tracer's handling of the custom ops does not depend on the depth, the lowering's time does."""
    from tests.llm.models import _build

    return _build(None, n_layers=1)


def tiny_llama_no_kv():
    """ExecuTorch's Llama Transformer without a KV cache (``forward(tokens)``), seeded random weights, one layer."""
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    from tests.llm.models import MAX_SEQ_LEN, PARAMS, PROMPT

    torch.manual_seed(0)
    model = construct_transformer(ModelArgs(**{**PARAMS, "n_layers": 1}, max_seq_len=MAX_SEQ_LEN,
                                            max_context_len=MAX_SEQ_LEN, use_kv_cache=False,
                                            enable_dynamic_shape=False))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.fill_(1.0) if name.endswith("norm.weight") else p.normal_(0.0, 0.02 if p.dim() > 1 else 0.1)
    tokens = torch.randint(0, PARAMS["vocab_size"], (1, PROMPT), generator=torch.Generator().manual_seed(0))
    return model.eval(), (tokens,)


@requires_executorch
@pytest.mark.slow
@pytest.mark.parametrize("builder", ["tests/builder/test_never_fail.py:tiny_llama_one_layer",
                                     "tests/builder/test_never_fail.py:tiny_llama_no_kv"])
def test_traced_lowering_of_executorch_llama(tmp_path, capsys, builder):
    """``report --model`` with the default flags (trace on) on ExecuTorch's Llama, with and without the KV
    cache: before, the tracer left unbacked symbols of llama::update_cache / custom_sdpa pending and the
    lowering stopped with PendingUnbackedSymbolNotFound; now the trace ends with the real lowering."""
    from etlens.cli.main import main
    from etlens.model.trace import Trace

    out = tmp_path / "llama.html"
    code = main(["report", "--model", builder, "--runs", "1", "--no-inside-delegates", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "PendingUnbackedSymbolNotFound" not in captured.err
    trace_file = next((tmp_path / "llama_artifacts").glob("*.trace.json"))
    trace = Trace.load(str(trace_file))
    assert trace.snapshots[-1].stage == "lower" and trace.snapshots[-1].error is None
    assert len(trace.snapshots[-1].graph) > 0
