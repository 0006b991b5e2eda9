"""explain_unpaired, first_divergence, the ``etlens gap`` CLI and bad input."""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest

from etlens.cli.main import main
from etlens.cli.options import EXIT_GATE
from etlens.errors import MissingDataError


def test_explain_delegate_without_intermediates(both):
    _, ours = both("mlp_xnnpack")
    ex = ours.explain_unpaired()
    ref = ex[ex.side == "reference"]
    assert list(ref.name) == ["linear", "relu", "linear_1"]
    assert set(ref.reason) == {"delegate_no_intermediates"}
    assert all("add" in d for d in ref.detail)  # the delegate's output is compared with the add
    rt = ex[ex.side == "runtime"]
    assert set(rt.reason) == {"no_debug_handle"}  # XNNPACK-internal profiling events
    assert len(rt) == 3


def test_explain_removed_view_multi_output_and_superseded(both):
    _, ours = both("transformer_portable")
    ex = ours.explain_unpaired()
    reasons = {(r.side, r.name): r.reason for r in ex.itertuples()}
    assert reasons[("reference", "reshape")] == "no_runtime_event"
    assert reasons[("reference", "unbind")] == "multi_output"
    superseded = ex[(ex.side == "runtime") & (ex.reason == "superseded")]
    assert superseded.name.str.contains("permute_copy|expand_copy|slice|squeeze").all()
    assert ex.module_path[ex.name == "reshape"].iloc[0] == "attn"
    assert "demos.py" in ex.stack_trace[ex.name == "reshape"].iloc[0]


def test_multi_output_option_adds_the_unbind_row(both):
    _, ours = both("transformer_portable")
    plain = ours.calculate_numeric_gap("MSE")
    multi = ours.calculate_numeric_gap("MSE", multi_output=True)
    assert len(multi) == len(plain) + 1
    extra = [r for r in multi.itertuples() if tuple(r.aot_debug_handle) == (5,)][0]
    assert extra.aot_ops == ["unbind"] and len(extra.gap) == 1 and extra.gap[0] < 1e-10


def test_removed_by_pass_on_quantized(both):
    """Every ATen node of the quantized CNN maps to an edge node: nothing is 'removed'."""
    _, ours = both("cnn_q8_xnnpack")
    ex = ours.explain_unpaired()
    assert "removed_by_pass" not in set(ex.reason)
    assert set(ex[ex.side == "reference"].reason) <= {"delegate_no_intermediates", "shares_handle"}


def test_first_divergence(both):
    from etlens.analysis import numerics

    _, ours = both("transformer_portable")
    df = ours.calculate_numeric_gap("MSE")
    assert numerics.first_divergence(ours, 1.0, "MSE") is None
    # a threshold between the gaps: the earliest crossing op in graph order, not the largest gap
    gaps = sorted(g[0] for g in df.gap)
    threshold = gaps[len(gaps) // 2]
    first = numerics.first_divergence(ours, threshold, "MSE")
    crossing = [i for i, g in enumerate(df.gap) if g[0] > threshold]
    assert first is not None and first.row == crossing[0]
    assert first.op in df.aot_ops[first.row]
    assert first.module_path is not None and first.stack_trace and "demos.py" in first.stack_trace
    assert "first divergence" in str(first)
    snr = numerics.first_divergence(ours, 1000.0, "SNR")  # every SNR is below 1000 dB: the first op
    assert snr.row == 0 and snr.op == "layer_norm"


def _gap_args(art, *extra):
    return ["gap", "--etdump", art.etdump, "--etrecord", art.etrecord, "--debug-buffer", art.debug_buffer, *extra]


def test_cli_exit_codes(artifacts, capsys):
    art = artifacts["transformer_portable"]
    assert main(_gap_args(art)) == 0
    out = capsys.readouterr().out
    assert "17 op groups" in out and "native_call_addmm.out" in out
    assert main(_gap_args(art, "--metric", "MSE", "--threshold", "1")) == 0
    assert main(_gap_args(art, "--metric", "SNR", "--threshold", "1000")) == EXIT_GATE  # the old spelling
    capsys.readouterr()
    assert main(_gap_args(art, "--metric", "SNR", "--fail-on-gap", "1000")) == EXIT_GATE
    out = capsys.readouterr().out
    assert "first divergence: layer_norm" in out


def test_cli_json(artifacts, capsys, tmp_path):
    art = artifacts["mixed_xnnpack"]
    out = tmp_path / "gap.json"
    assert main(_gap_args(art, "--metric", "max_abs", "--threshold", "0", "--format", "json", "--explain",
                          "-o", str(out))) in (0, EXIT_GATE)
    doc = json.loads(out.read_text())
    assert doc["metric"] == "max_abs" and len(doc["rows"]) == 3
    assert [r["aot_ops"] for r in doc["rows"]] == [["linear", "relu"], ["cumsum"], ["linear_1", "sin", "linear_2"]]
    assert doc["unpaired"] and {"side", "reason", "detail"} <= set(doc["unpaired"][0])


def test_cli_missing_debug_buffer(artifacts, capsys, tmp_path):
    art = artifacts["mlp_portable"]
    args = ["gap", "--etdump", art.etdump, "--etrecord", art.etrecord, "--debug-buffer", str(tmp_path / "nope.bin")]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "nope.bin" in err and "debug_buffer_size" in err and "Traceback" not in err


def test_inspector_without_debug_buffer(artifacts):
    from etlens.analysis.inspector import Inspector

    art = artifacts["mlp_portable"]
    insp = Inspector(etdump_path=art.etdump, etrecord=art.etrecord)
    with pytest.raises(MissingDataError, match="debug_buffer_path"):
        insp.calculate_numeric_gap("MSE")


def test_etrecord_without_representative_inputs(artifacts, tmp_path, capsys):
    art = artifacts["mlp_portable"]
    stripped = tmp_path / "no_inputs.etrecord"
    with zipfile.ZipFile(art.etrecord) as src, zipfile.ZipFile(stripped, "w") as dst:
        for item in src.infolist():
            if item.filename != "representative_inputs":
                dst.writestr(item, src.read(item.filename))
    args = ["gap", "--etdump", art.etdump, "--etrecord", str(stripped), "--debug-buffer", art.debug_buffer]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "representative inputs" in err and "update_representative_inputs" in err
    assert "generate_etrecord=True" in err


def test_dump_without_intermediate_outputs(artifacts, tmp_path):
    from tests.fixtures import generate

    from etlens.analysis.inspector import Inspector
    from etlens.demos import get_demo

    art = artifacts["mlp_portable"]
    _, inputs = get_demo("mlp")
    etdp = tmp_path / "plain.etdp"
    generate.run_with_etdump(open(art.pte, "rb").read(), inputs, 1, str(etdp), None)
    insp = Inspector(etdump_path=str(etdp), etrecord=art.etrecord)
    with pytest.raises(MissingDataError, match="no intermediate outputs") as info:
        insp.calculate_numeric_gap("MSE")
    assert "debug_buffer_size" in str(info.value) and "enable_etdump" in str(info.value)


def test_unknown_reference_graph(both):
    _, ours = both("mlp_portable")
    with pytest.raises(MissingDataError, match="not in the ETRecord"):
        ours.calculate_numeric_gap("MSE", reference_graph="nope")


def test_copied_record_is_not_mutated(both, tmp_path):
    """Asking for the ATen reference twice gives the same table (ExecuTorch mutates its program)."""
    _, ours = both("mlp_portable")
    from etlens.analysis import numerics

    a = numerics.calculate_numeric_gap(ours, "MSE", reference_graph="exported_program")
    numerics.api._cache_of(ours).clear()  # the analyses kept for this Inspector
    b = numerics.calculate_numeric_gap(ours, "MSE", reference_graph="exported_program")
    assert [list(x) for x in a.aot_ops] == [list(x) for x in b.aot_ops]
    shutil.rmtree(tmp_path, ignore_errors=True)
