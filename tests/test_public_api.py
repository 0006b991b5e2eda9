"""The public API is explicit: these names, importable lazily, and nothing heavy at import time."""

from __future__ import annotations

import subprocess
import sys

import etlens

PUBLIC = {
    "BackendConfig", "DelegateInfo", "EtlensError", "Event", "EventBlock", "FormatError", "Graph", "Inspector",
    "MissingDataError", "Node", "PerfData", "TensorMeta", "UnsupportedFormatError", "__version__",
    "extract_from_etrecord", "extract_from_exported_program", "extract_from_pte", "format_delegated_graph",
    "generate_html", "generate_multi_pass_html", "get_delegation_info", "print_delegated_graph", "read",
    "read_object", "register_backend", "show", "sniff", "trace_passes", "visualize_edge_manager",
}


def test_public_names_are_pinned():
    assert set(etlens.__all__) == PUBLIC


def test_every_public_name_resolves():
    for name in etlens.__all__:
        assert getattr(etlens, name) is not None, name


def test_import_is_light():
    code = "import sys, etlens; print(','.join(k for k in ('torch', 'pandas', 'executorch') if k in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_compatible_names_match_executorch_devtools():
    """Names promised by the compatibility section exist with ExecuTorch's spelling."""
    insp = etlens.Inspector
    for method in ("to_dataframe", "print_data_tabular", "save_data_to_tsv", "find_total_for_module",
                   "get_exported_program", "calculate_numeric_gap", "get_op_list", "write_tensorboard_artifact"):
        assert callable(getattr(insp, method)), method
    assert isinstance(insp.event_blocks, property)


BUILD = {
    "BackendConfig", "BuildSession", "DeviceArtifacts", "InsideResult", "ModelError", "NativeStageError",
    "PassSpec", "Worker", "available_backends", "backend_names", "get_backend", "get_demo", "inside_delegates",
    "load_model", "quantize_pt2e", "register_backend", "run_program", "start_worker",
}


def test_build_names_are_pinned_and_light():
    """``etlens.builder`` (the one way a model is exported, quantized, lowered and run): pinned, lazy."""
    import etlens.builder

    assert set(etlens.builder.__all__) == BUILD
    for name in etlens.builder.__all__:
        assert getattr(etlens.builder, name) is not None, name
    code = "import sys, etlens.builder; print(','.join(k for k in ('torch', 'executorch') if k in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
