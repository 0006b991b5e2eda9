"""The Cortex-M seed pipeline end to end: quantize → export → to_edge → QuantizeInputs/Outputs →
CortexMPassManager pass by pass → to_executorch (.pte), checked against ExecuTorch's own manager.

The reference flow is what ExecuTorch's Arm compiler (``aot_arm_compiler.py``) does for Cortex-M:
``to_edge_transform_and_lower`` without a partitioner, then ``CortexMPassManager(...).transform()``.
Its program runs here in Python (the ``cortex_m`` ops have reference implementations), so the int8
program is compared with the float model; the pip runtime has no ``cortex_m::`` kernels.
"""

from __future__ import annotations

import copy

import pytest

from etlens.errors import EtlensError
from etlens.builder.backends import get_backend

from .conftest import HAS_EXECUTORCH

_CM = get_backend("cortex_m")
_WHY = None if not HAS_EXECUTORCH else _CM.advice()
requires_cortex_m = pytest.mark.skipif(not HAS_EXECUTORCH or _WHY is not None,
                                       reason=f"cortex_m backend unavailable: {_WHY or 'needs the executorch extra'}")

_IO = ["QuantizeInputs", "QuantizeOutputs"]


def _trace(model_name, tmp_path_factory):
    import etlens

    if model_name == "ds_cnn":
        from tests.corpus.models import ds_cnn

        model, inputs = ds_cnn()
    else:
        from etlens.demos import get_demo

        model, inputs = get_demo(model_name)
    out = tmp_path_factory.mktemp("cortex_m")
    trace = etlens.trace_passes(model, inputs, backend="cortex_m", quantize=True, quantize_io=True,
                                name=model_name, output=str(out / "t.json"), pte=str(out / "m.pte"),
                                progress=False)
    return trace, out


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return _trace("cnn", tmp_path_factory)


@pytest.fixture(scope="module")
def reference():
    """ExecuTorch's own Cortex-M flow on the demo CNN, with the I/O passes where the tracer puts them.

    Returns ``(float model, channels-last input, edge program right after to_edge, program after the
    I/O passes and CortexMPassManager, QuantizeInputs, QuantizeOutputs)``.
    """
    import torch
    from executorch.backends.cortex_m.passes import CortexMPassManager
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.program._program import _transform

    from etlens.demos import get_demo
    from etlens.builder.quantize import quantize_pt2e
    from etlens.passes.quantize_io import QuantizeInputs, QuantizeOutputs

    model, inputs = get_demo("cnn")
    inputs = _CM.prepare_inputs(inputs)
    ep = torch.export.export(quantize_pt2e(model, inputs, _CM), inputs)
    edge = to_edge_transform_and_lower(ep, compile_config=_CM.edge_compile_config()).exported_program()
    qin, qout = QuantizeInputs(indices=[0]), QuantizeOutputs(indices=[0])
    io = _transform(_transform(copy.deepcopy(edge), qin), qout)
    final = CortexMPassManager(io).transform()
    return model, inputs[0], edge, final, qin, qout


@requires_cortex_m
def test_snapshots_are_the_pass_managers_passes(cnn):
    from executorch.backends.cortex_m.passes import CortexMPassManager

    trace, _ = cnn
    assert trace.failed is None, trace.failed.error["message"]
    manager = [cls.__name__ for cls in CortexMPassManager(None).passes]
    assert len(manager) >= 5
    # transform() runs the pass classes, then lift_constant_tensor_pass on the result
    expected = ["quantize", "export", "to_edge", *_IO, *manager, "lift_constant_tensor_pass", "to_executorch"]
    assert [s.name for s in trace.snapshots] == expected
    stages = [s.stage for s in trace.snapshots]
    assert stages == (["quantize", "export", "to_edge", "quantize_io", "quantize_io"]
                      + ["pass"] * (len(manager) + 1) + ["lower"])


def _io_dtypes(graph):
    inputs = [n.outputs[0].dtype for n in graph if n.kind == "input"]
    by_name = {n.name: n for n in graph}
    out = next(n for n in graph if n.kind == "output")
    outputs = [by_name[i].outputs[0].dtype for i in out.inputs]
    return inputs, outputs


@requires_cortex_m
def test_program_io_is_int8_and_ops_are_cortex_m(cnn):
    trace, _ = cnn
    to_edge = next(s for s in trace.snapshots if s.name == "to_edge")
    assert _io_dtypes(to_edge.graph) == (["float32"], ["float32"])  # the pt2e float wrapper
    for name in ("QuantizeOutputs", "lift_constant_tensor_pass", "to_executorch"):
        graph = next(s for s in trace.snapshots if s.name == name).graph
        assert _io_dtypes(graph) == (["int8"], ["int8"]), name
    final = trace.snapshots[-1].graph
    targets = [n.target for n in final if n.kind == "op"]
    assert not [t for t in targets if t.startswith(("quantized_decomposed", "aten.convolution"))], targets
    compute = [n for n in final if n.kind == "op" and n.target.startswith("cortex_m.quantized_")]
    assert {n.target for n in compute} >= {"cortex_m.quantized_conv2d.out", "cortex_m.quantized_depthwise_conv2d.out",
                                           "cortex_m.quantized_linear.out"}
    assert {n.category for n in compute} == {"backend"}
    # the I/O snapshots removed exactly the boundary (de)quantize ops
    qin = next(s for s in trace.snapshots if s.name == "QuantizeInputs")
    gone = [n for n in qin.diff["removed"] + qin.diff["replaced"] if "quantize_per_tensor" in n]
    assert len(gone) == 1 and qin.nodes_delta == -1, qin.diff


@requires_cortex_m
def test_pte_written_and_handles_reported(cnn):
    trace, out = cnn
    data = (out / "m.pte").read_bytes()
    assert data[4:6] == b"ET" and len(data) > 1000
    assert trace.meta["pte"] == "m.pte"
    for s in trace.snapshots[1:]:
        assert s.diff is not None and s.handle_report["ops"] > 0 and "lost" in s.handle_report
    # the memory plan of the program, as ExecuTorch serialized it
    from executorch.exir._serialize._program import deserialize_pte_binary

    loaded = deserialize_pte_binary(data)
    plan = getattr(loaded, "program", loaded).execution_plan[0]
    final = trace.snapshots[-1].graph
    assert final.meta["memory_arenas"] == list(plan.non_const_buffer_sizes) and final.meta["memory_arenas"][1] > 0
    planned = [n.attrs["memory"] for n in final if "memory" in n.attrs]
    assert len(planned) >= 10 and all(m["offset"] + m["bytes"] <= final.meta["memory_arenas"][m["mem_id"]]
                                      for m in planned)
    x = next(n for n in final if n.kind == "input")
    assert x.attrs["memory"]["bytes"] == 3 * 32 * 32  # int8 input, one byte per element
    fused = next(s for s in trace.snapshots if s.name == "FoldAndAnnotateQParamsPass")
    assert fused.nodes_delta < 0 and fused.diff["removed"] + fused.diff["replaced"]


@requires_cortex_m
def test_io_passes_find_their_nodes_only_before_the_cortex_m_passes(reference):
    from executorch.backends.cortex_m.passes import CortexMPassManager

    from etlens.passes.quantize_io import QuantizeInputs, QuantizeOutputs

    _, _, edge, _, _, _ = reference
    # right after to_edge_transform_and_lower: the boundary ops are quantized_decomposed, found
    before = copy.deepcopy(edge)
    qin, qout = QuantizeInputs(indices=[0]), QuantizeOutputs(indices=[0])
    assert qin(before.graph_module).modified and qout(before.graph_module).modified
    assert str(qin.qparams[0].dtype) == "torch.int8" and str(qout.qparams[0].dtype) == "torch.int8"
    # after CortexMPassManager: they are cortex_m.quantize_per_tensor / dequantize_per_tensor now
    after = CortexMPassManager(copy.deepcopy(edge)).transform()
    boundary = [str(n.target) for n in after.graph.nodes if n.op == "call_function" and "quantize_per" in str(n.target)]
    assert boundary and all("cortex_m" in t for t in boundary), boundary
    with pytest.raises(EtlensError, match="QuantizeInputs: input 0"):
        QuantizeInputs(indices=[0])(after.graph_module)
    with pytest.raises(EtlensError, match="QuantizeOutputs: output 0 is produced by cortex_m"):
        QuantizeOutputs(indices=[0])(after.graph_module)


@requires_cortex_m
def test_trace_matches_executorch_flow_and_int8_program_matches_float(cnn, reference):
    import torch

    trace, _ = cnn
    model, x, _, final, qin, qout = reference
    ours = sorted(n.target for n in trace.snapshots[-2].graph if n.kind == "op")
    theirs = sorted(getattr(n.target, "__name__", "") if callable(n.target) and not hasattr(n.target, "_op")
                    else str(n.target._op) for n in final.graph.nodes if n.op == "call_function")
    assert ours == theirs
    # the Cortex-M program runs here through the cortex_m ops' Python implementations
    y_q = final.module()(qin.qparams[0].quantize(x))
    assert y_q.dtype == torch.int8
    y = qout.qparams[0].dequantize(y_q)
    ref = model(x)
    cos = torch.nn.functional.cosine_similarity(y.flatten(), ref.flatten(), dim=0).item()
    assert cos > 0.99 and (y - ref).abs().max().item() < 0.05 * ref.abs().max().item() + 4 * qout.qparams[0].scale


@requires_cortex_m
@pytest.mark.parametrize("model_name", ["mlp", "ds_cnn"])
def test_other_models(model_name, tmp_path_factory):
    trace, out = _trace(model_name, tmp_path_factory)
    assert trace.failed is None, trace.failed.error["message"]
    assert _io_dtypes(trace.snapshots[-1].graph) == (["int8"], ["int8"])
    backend_ops = {n.target for n in trace.snapshots[-1].graph if n.category == "backend"}
    assert "cortex_m.quantized_linear.out" in backend_ops
    if model_name == "ds_cnn":
        assert "cortex_m.quantized_depthwise_conv2d.out" in backend_ops
    assert (out / "m.pte").stat().st_size > 1000


def test_quantize_capture_has_no_guards_fn():
    """torch 2.13's ``.module()`` adds a ``_guards_fn`` call; the shared pt2e capture must not."""
    import torch

    from etlens.demos import get_demo
    from etlens.builder.quantize import capture_for_pt2e

    model, inputs = get_demo("mlp")
    plain = torch.export.export(model, inputs).module()
    calls = [n.target for n in plain.graph.nodes if n.op == "call_module"]
    if "_guards_fn" not in calls:
        pytest.skip("this torch adds no _guards_fn submodule")
    gm = capture_for_pt2e(model, inputs)
    assert not [n for n in gm.graph.nodes if n.op == "call_module"]
    assert not hasattr(gm, "_guards_fn")
    assert torch.allclose(gm(*inputs), model(*inputs))


def test_import_advice_names_what_to_install():
    from etlens.builder.backends import get_backend, import_advice

    exc = ModuleNotFoundError("No module named 'tosa_serializer'", name="tosa_serializer")
    text = import_advice(exc, advice=get_backend("cortex_m").module_advice)  # the backend's own advice
    assert "etlens[cortex-m]" in text and "tosa-tools==2026.5.0" in text
    exc = ImportError("cannot import name 'override' from 'typing' (/usr/lib/python3.11/typing.py)")
    assert "typing.override, new in Python 3.12" in import_advice(exc)
    assert "Python 3.12+ environment" in import_advice(exc)
    exc = ImportError("cannot import name 'Brandnew' from 'typing' (/usr/lib/python3.11/typing.py)")
    assert "typing.Brandnew, which Python" in import_advice(exc)
    exc = ModuleNotFoundError("No module named 'executorch'", name="executorch")
    assert "etlens[executorch]" in import_advice(exc)
    assert import_advice(ModuleNotFoundError("x", name="zzz_pkg"), "pip install zzz") == "pip install zzz"


def test_list_backends_says_what_to_install(capsys, monkeypatch):
    from etlens.cli.main import main
    from etlens.builder.backends import BackendConfig, register_backend

    register_backend(BackendConfig(name="needs_tosa_test", requires=["tosa_serializer_not_here_etlens"],
                                   description="test backend"), replace=True)
    from etlens.builder import backends

    monkeypatch.setitem(backends.MISSING_MODULE_ADVICE, "tosa_serializer_not_here_etlens", "pip install tosa-x")
    assert main(["trace", "--list-backends"]) == 0
    text = capsys.readouterr().out
    block = text[text.index("needs_tosa_test"):]
    assert "unavailable: cannot import tosa_serializer_not_here_etlens" in block
    assert "to use it: pip install tosa-x" in block
    lines = text.splitlines()
    for i, line in enumerate(lines):  # every unavailable backend is followed by what to do
        if "[unavailable:" in line:
            assert lines[i + 1].strip().startswith("to use it: "), lines[i - 1]


def test_extras_bring_tosa_tools():
    import pathlib

    try:
        import tomllib
    except ImportError:  # Python 3.10
        pytest.skip("tomllib needs Python 3.11")
    root = pathlib.Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "executorch==1.5.1" in extras["cortex-m"] and "etlens[cortex-m]" in extras["executorch"]
    # tosa-tools goes in without its exact pins (flatbuffers 25.2.10 would change how ExecuTorch writes .pte files)
    assert not [r for r in extras["cortex-m"] if r.startswith("tosa-tools")]
    assert "--no-deps tosa-tools==2026.5.0" in (root / "scripts" / "setup.sh").read_text()  # pip, without its pins


@requires_cortex_m
def test_viewer_payload_shows_backend_ops_and_int8_ends(cnn):
    from etlens.views.html.payload import Strings, graph_payload

    trace, _ = cnn
    strings = Strings()
    cols = graph_payload(trace.snapshots[-1].graph, strings)["nodes"]
    text = ("target", "category", "shape", "name")
    row = [{k: (strings.table[v] if v >= 0 else "") if k in text else v for k, v in zip(cols, vals)}
           for vals in zip(*(cols[k] for k in cols))]
    cortex = [r for r in row if r["target"].startswith("cortex_m.quantized_")]
    assert cortex and {r["category"] for r in cortex} == {"backend"}
    ends = [r for r in row if r["category"] in ("placeholder", "output")]
    assert ends and all(r["shape"].startswith("i8[") for r in ends), ends


@requires_cortex_m
def test_cli_writes_pte_and_says_it_cannot_run_here(tmp_path, capsys):
    from etlens.cli.main import main

    out = tmp_path / "mlp.json"
    assert main(["trace", "--model", "mlp", "--backend", "cortex_m", "--quantize", "--quantize-io",
                 "-o", str(out), "--no-times"]) == 0
    text = capsys.readouterr().out
    assert f"wrote {tmp_path / 'mlp.pte'}" in text and (tmp_path / "mlp.pte").stat().st_size > 1000
    # checked against the operator list of the installed runtime (a child process)
    note = next(line for line in text.splitlines() if line.startswith("note: "))
    assert "no kernels for cortex_m::" in note and "cortex_m::quantized_linear.out" in note
    assert "aten::" not in note  # the portable add kernel exists


@requires_cortex_m
def test_cli_runs_a_float_program_here_and_compares(tmp_path, capsys):
    from etlens.cli.main import main

    assert main(["trace", "--model", "mlp", "--backend", "cortex_m", "-o", str(tmp_path / "f.json")]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("ran "))
    assert "in the ExecuTorch runtime here" in line  # portable kernels only: it runs, in a child process
    assert float(line.rsplit("difference ", 1)[1].split()[0]) < 1e-4
