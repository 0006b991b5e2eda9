"""Nested model inputs (``(x, (h0, c0))``, ``(x, {"h": h0})``) are kept as a pytree end to end.

Before, ``etlens report --model`` on ExecuTorch's LSTM example failed in the runtime child
("Unsupported python type <class 'tuple'>") and inside-delegates exported its instrumented builds with
the nested inputs a flat graph cannot take. The runtime now gets the flattened leaves, in the order
``torch.export`` gives the program's inputs.
"""

from __future__ import annotations

import pytest

from tests.conftest import requires_executorch


def test_as_args_keeps_structure_and_flatten_follows_export_order():
    import torch

    from etlens.builder.inputs import as_args, describe_inputs, flatten_inputs, is_nested

    x, h, c = torch.zeros(5, 3, 10), torch.ones(2, 3, 20), torch.full((2, 3, 20), 2.0)
    args = as_args([x, (h, c)])
    assert isinstance(args, tuple) and args[1] == (h, c) and is_nested(args)
    assert not is_nested((x, h)) and as_args(x) == (x,)
    flat = flatten_inputs(args)
    assert [t is v for t, v in zip(flat, (x, h, c))] == [True, True, True]
    # the same order torch.export gives the program's user inputs

    class M(torch.nn.Module):
        def forward(self, a, state):
            return a.sum() + state[0].sum() * 2 + state[1].sum() * 3

    ep = torch.export.export(M(), args)
    users = [s.arg.name for s in ep.graph_signature.input_specs]
    assert len(users) == 3 and ep.module()(*args) == M()(*args)
    assert torch.equal(torch.tensor(float(ep.module()(*args))), torch.tensor(float(M()(*flat[:1], tuple(flat[1:])))))
    assert describe_inputs(args) == "(f32[5, 3, 10], (f32[2, 3, 20], f32[2, 3, 20]))"
    assert flatten_inputs({"h": h, "c": c}) == [h, c] or flatten_inputs({"h": h, "c": c}) == [c, h]


def test_args_for_graph_modules_with_and_without_pytree_calling_convention():
    import torch

    from etlens.builder.inputs import args_for

    class M(torch.nn.Module):
        def forward(self, a, state):
            return a + state["h"]

    args = (torch.ones(2), {"h": torch.ones(2)})
    gm = torch.export.export(M(), args).module()
    assert args_for(gm, args) == args                      # export's module flattens itself
    plain = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())  # plain calling convention, as
    a, h = plain.graph.placeholder("a"), plain.graph.placeholder("h")  # inside-delegates' instrumented
    plain.graph.output((plain.graph.call_function(torch.add, (a, h)),))  # copies have
    plain.recompile()
    flat = args_for(plain, args)
    assert len(flat) == 2 and torch.equal(plain(*flat)[0], torch.full((2,), 2.0))


def test_bad_leaf_is_a_clear_error():
    import torch

    from etlens.errors import EtlensError
    from etlens.builder.inputs import check_inputs

    with pytest.raises(EtlensError, match=r"\[1\]\[0\]: a str"):
        check_inputs((torch.ones(1), ("oops",)), "inputs")


def test_loader_keeps_nested_inputs():
    from etlens.builder.loader import load_model

    model, inputs, name = load_model("tests/corpus/models.py:rnn_loop")
    assert name == "rnn_loop" and isinstance(inputs[1], dict) and set(inputs[1]) == {"h"}
    out, h = model(*inputs)
    assert out.shape == (2, 4, 4) and h.shape == (2, 8)


def test_trace_cli_with_nested_inputs(tmp_path, capsys):
    from etlens.cli.main import main

    out = tmp_path / "rnn.trace.json"
    assert main(["trace", "--model", "tests/corpus/models.py:rnn_loop", "--backend", "aten", "-o", str(out)]) == 0
    assert out.stat().st_size > 1000


@pytest.mark.slow
@requires_executorch
def test_inside_delegates_with_nested_inputs():
    """Instrumented builds of a model with ``(x, {"h": h0})`` inputs: every value exposed, exact in fp32."""
    from etlens.builder.inside import inside_delegates
    from tests.corpus.models import build

    model, inputs = build("rnn_loop")
    res = inside_delegates(model, inputs, backend="xnnpack", metric="MSE", progress=False, observe=False)
    assert res.method["exposed"] >= 16 and not res.method["unexposed"], res.method["unexposed"][:2]
    assert res.rows and max(r["gap"] for r in res.rows) < 1e-9
