"""etlens.Inspector equals executorch.devtools.Inspector on real dumps, row by row."""

from __future__ import annotations

import io
import warnings

import pytest

from tests.conftest import requires_executorch

from tests.analysis.inspector._inspector_compare import frame_diffs, same

pytestmark = requires_executorch

CASES = ["mlp_xnnpack", "mlp_portable", "cnn_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack", "transformer_portable"]
VARIANTS = {"full": ("etrecord", "debug_buffer"), "etrecord_only": ("etrecord",), "dump_only": ()}


def _kwargs(art, variant):
    kw = {}
    if "etrecord" in VARIANTS[variant]:
        kw["etrecord"] = art.etrecord
    if "debug_buffer" in VARIANTS[variant]:
        kw["debug_buffer_path"] = art.debug_buffer
    return kw


def _pair(art, variant):
    from executorch.devtools import Inspector as ETInspector

    import etlens

    kw = _kwargs(art, variant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ETInspector(etdump_path=art.etdump, **kw)
        ours = etlens.Inspector(etdump_path=art.etdump, **kw)
    return theirs, ours


_CACHE: dict = {}


def pair(artifacts, case, variant):
    key = (case, variant)
    if key not in _CACHE:
        _CACHE[key] = _pair(artifacts[case], variant)
    return _CACHE[key]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("case", CASES)
def test_dataframe_equals_executorch(artifacts, case, variant):
    theirs, ours = pair(artifacts, case, variant)
    expected = theirs.to_dataframe()
    got = ours.to_dataframe()
    assert len(got) > 0
    assert frame_diffs(expected, got) == []


@pytest.mark.parametrize("case", CASES)
def test_events_equal_executorch(artifacts, case):
    theirs, ours = pair(artifacts, case, "full")
    assert [b.name for b in ours.event_blocks] == [b.name for b in theirs.event_blocks]
    for tb, ob in zip(theirs.event_blocks, ours.event_blocks):
        assert ob.bundled_input_index == tb.bundled_input_index
        assert same(list(tb.run_output), list(ob.run_output))
        assert same(tb.reference_output, ob.reference_output)
        assert len(ob.events) == len(tb.events)
        for te, oe in zip(tb.events, ob.events):
            for f in ("name", "op_types", "delegate_debug_identifier", "debug_handles", "num_outputs",
                      "stack_traces", "module_hierarchy", "is_delegated_op", "delegate_backend_name",
                      "_instruction_id", "start_time"):
                assert same(getattr(te, f), getattr(oe, f)), (case, te.name, f)
            assert same(te.debug_data, list(oe.debug_data)), (case, te.name)
            assert same(te.raw_delegate_debug_metadatas, oe.raw_delegate_debug_metadatas)
            if te.perf_data is None:
                assert oe.perf_data is None
            else:
                for stat in ("raw", "p10", "p50", "p90", "avg", "min", "max"):
                    assert same(getattr(te.perf_data, stat), getattr(oe.perf_data, stat)), (te.name, stat)


def test_dataframe_via_event_objects_is_the_same(artifacts):
    """Materialising event_blocks first switches to_dataframe to the per-event path: same frame."""
    theirs, _ = pair(artifacts, "mixed_xnnpack", "full")
    _, ours = _pair(artifacts["mixed_xnnpack"], "full")
    fast = ours.to_dataframe()
    ours.event_blocks  # noqa: B018
    slow = ours.to_dataframe()
    assert frame_diffs(fast, slow) == []
    assert frame_diffs(theirs.to_dataframe(), slow) == []


@pytest.mark.parametrize("units", [True, False])
def test_block_dataframe_and_units(artifacts, units):
    theirs, ours = pair(artifacts, "mlp_portable", "full")
    assert frame_diffs(theirs.to_dataframe(include_units=units), ours.to_dataframe(include_units=units)) == []
    for tb, ob in zip(theirs.event_blocks, ours.event_blocks):
        assert frame_diffs(tb.to_dataframe(include_units=units), ob.to_dataframe(include_units=units)) == []


def test_include_delegate_debug_data(artifacts):
    theirs, ours = pair(artifacts, "cnn_xnnpack", "full")
    assert frame_diffs(theirs.to_dataframe(include_delegate_debug_data=True),
                       ours.to_dataframe(include_delegate_debug_data=True)) == []


@pytest.mark.parametrize("case", ["mixed_xnnpack", "transformer_portable"])
def test_tsv_and_tabular_equal_executorch(artifacts, case):
    theirs, ours = pair(artifacts, case, "full")
    a, b = io.StringIO(), io.StringIO()
    theirs.save_data_to_tsv(a)
    ours.save_data_to_tsv(b)
    assert a.getvalue() == b.getvalue()
    a, b = io.StringIO(), io.StringIO()
    theirs.print_data_tabular(file=a)
    ours.print_data_tabular(file=b)
    assert a.getvalue() == b.getvalue()
    assert "OPERATOR_CALL" not in b.getvalue()


@pytest.mark.parametrize("module", ["fc1", "fc2", "L__self__", "nothing_here"])
def test_find_total_for_module(artifacts, module):
    theirs, ours = pair(artifacts, "mlp_portable", "full")
    assert ours.find_total_for_module(module) == theirs.find_total_for_module(module)
    if module == "fc1":
        assert ours.find_total_for_module(module) > 0


def test_time_scales(artifacts):
    from executorch.devtools import Inspector as ETInspector
    from executorch.devtools.inspector import TimeScale as ETTimeScale

    import etlens
    from etlens.analysis.inspector import TimeScale

    art = artifacts["mixed_xnnpack"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ETInspector(etdump_path=art.etdump, source_time_scale=ETTimeScale.US, target_time_scale=ETTimeScale.S,
                        delegate_time_scale_converter=lambda name, x: x * 3)
        o = etlens.Inspector(etdump_path=art.etdump, source_time_scale=TimeScale.US, target_time_scale=TimeScale.S,
                             delegate_time_scale_converter=lambda name, x: x * 3)
    assert frame_diffs(t.to_dataframe(), o.to_dataframe()) == []
    assert "p10 (s)" in o.to_dataframe().columns
    with pytest.raises(etlens.EtlensError, match="CYCLES"):
        etlens.Inspector(etdump_path=art.etdump, source_time_scale=TimeScale.CYCLES)


def test_delegate_metadata_parser(artifacts):
    from executorch.devtools import Inspector as ETInspector

    import etlens

    art = artifacts["cnn_xnnpack"]
    parser = lambda metas: {"n": len(metas)}  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ETInspector(etdump_path=art.etdump, delegate_metadata_parser=parser)
        o = etlens.Inspector(etdump_path=art.etdump, delegate_metadata_parser=parser)
    for tb, ob in zip(t.event_blocks, o.event_blocks):
        for te, oe in zip(tb.events, ob.events):
            assert same(te.delegate_debug_metadatas, oe.delegate_debug_metadatas)


def test_etdump_data_and_parsed_record(artifacts):
    import etlens
    from etlens.readers.etrecord import read

    art = artifacts["mlp_xnnpack"]
    theirs, _ = pair(artifacts, "mlp_xnnpack", "etrecord_only")
    with open(art.etdump, "rb") as f:
        data = f.read()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o = etlens.Inspector(etdump_data=data, etrecord=read(art.etrecord))
    assert frame_diffs(theirs.to_dataframe(), o.to_dataframe()) == []
    with pytest.raises(etlens.EtlensError, match="exactly one"):
        etlens.Inspector(etdump_path=art.etdump, etdump_data=data)


def test_executorch_etrecord_object_accepted(artifacts):
    """An ExecuTorch-parsed ETRecord works too (node metadata from its FX graph)."""
    from executorch.devtools.etrecord import parse_etrecord

    import etlens

    art = artifacts["mixed_xnnpack"]
    theirs, _ = pair(artifacts, "mixed_xnnpack", "full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o = etlens.Inspector(etdump_path=art.etdump, etrecord=parse_etrecord(art.etrecord),
                             debug_buffer_path=art.debug_buffer)
    assert frame_diffs(theirs.to_dataframe(), o.to_dataframe()) == []


def test_enable_module_hierarchy_and_reference_graph(artifacts):
    from executorch.devtools import Inspector as ETInspector

    import etlens

    art = artifacts["transformer_portable"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ETInspector(etdump_path=art.etdump, etrecord=art.etrecord, enable_module_hierarchy=True)
        o = etlens.Inspector(etdump_path=art.etdump, etrecord=art.etrecord, enable_module_hierarchy=True)
    assert frame_diffs(t.to_dataframe(), o.to_dataframe()) == []
    assert o.to_dataframe()["module_hierarchy"].map(len).sum() > 0


def test_get_exported_program(artifacts):
    theirs, ours = pair(artifacts, "mixed_xnnpack", "full")
    a, b = theirs.get_exported_program(), ours.get_exported_program()
    assert [n.name for n in a.graph.nodes] == [n.name for n in b.graph.nodes]
    assert ours.get_exported_program("no/such") is None
    _, bare = pair(artifacts, "mixed_xnnpack", "dump_only")
    assert bare.get_exported_program() is None
