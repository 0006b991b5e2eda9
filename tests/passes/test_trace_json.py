"""Trace JSON: round trip, byte stability, readers, and clear errors on bad files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from etlens.errors import FormatError, MissingDataError


def test_round_trip_is_lossless_and_byte_stable(mlp_aten, tmp_path):
    from etlens.model.trace import Trace

    trace, path = mlp_aten
    text = open(path, encoding="utf-8").read()
    again = Trace.load(path)
    assert again.dumps() == text
    assert again.to_json() == trace.to_json()
    assert [s.name for s in again] == ["export", "run_decompositions"]
    s = again["run_decompositions"]
    assert s.graph.to_json() == trace["run_decompositions"].graph.to_json()
    assert s.handle_report == trace["run_decompositions"].handle_report


def test_same_run_gives_same_bytes_without_times(tmp_path):
    import etlens
    from etlens.demos import get_demo

    outs = []
    for i in range(2):
        out = tmp_path / f"t{i}.json"
        etlens.trace_passes(*get_demo("mlp"), backend="aten", record_times=False, output=str(out))
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert b'"wall_time_s":0.0' in outs[0]


def test_aten_decomposition_shares_parent_handle(mlp_aten):
    """run_decompositions turns linear into permute + addmm: both carry linear's handle."""
    trace, _ = mlp_aten
    export, dec = trace["export"].graph, trace["run_decompositions"]
    linear = next(n for n in export if n.target == "aten.linear.default")
    kids = [n for n in dec.graph if n.kind == "op" and dec.diff.get("origin", {}).get(n.name) == linear.name]
    assert {n.target for n in kids} == {"aten.permute.default", "aten.addmm.default"}
    assert all(n.name in dec.diff["added"] + dec.diff["rewritten"] for n in kids)
    assert {n.debug_handles for n in kids} == {linear.debug_handles}
    assert len(linear.debug_handles) == 1


def test_readers_registry_and_graph_json(mlp_aten, tmp_path):
    from etlens.readers import read, sniff

    trace, path = mlp_aten
    assert sniff(path).format == "trace"
    art = read(path)
    assert art.trace.model == "mlp" and art.trace.backend == "aten"
    assert set(art.graphs()) == {"export", "run_decompositions"}
    g = trace["export"].graph
    gpath = tmp_path / "g.json"
    gpath.write_text(json.dumps(g.to_json()))
    gart = read(gpath)
    assert gart.format == "graph" and list(gart.graphs().values())[0].to_json() == g.to_json()


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(version=99), "version 99 is not supported"),
    (lambda d: d.update(schema="something.else"), "not an etlens trace"),
    (lambda d: d["snapshots"][1].pop("graph"), r"snapshots\[1\]: missing field 'graph'"),
    (lambda d: d.update(snapshots={}), "'snapshots' must be a list"),
    (lambda d: d["snapshots"][0].update(diff=[1]), r"snapshots\[0\]\.diff"),
    (lambda d: d["snapshots"][0]["graph"]["nodes"].update(name=[999]), r"snapshots\[0\]"),
])
def test_bad_files_raise_format_error(mlp_aten, tmp_path, mutate, match):
    from etlens.readers.trace import read

    _, path = mlp_aten
    data = json.load(open(path))
    mutate(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=match):
        read(bad)


def test_truncated_and_missing(mlp_aten, tmp_path):
    from etlens.readers import read
    from etlens.readers.trace import read as read_trace, read_graph_json

    _, path = mlp_aten
    raw = open(path, "rb").read()
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(FormatError, match="truncated"):
        read(cut)
    with pytest.raises(MissingDataError):
        read_trace(tmp_path / "nope.json")
    junk = tmp_path / "junk.json"
    junk.write_text('{"schema": "etlens.graph", "version": 1, "nodes": 3}')
    with pytest.raises(FormatError):
        read_graph_json(junk)


def test_aten_backend_works_without_executorch(tmp_path):
    """A meta_path blocker makes every executorch import fail: aten still traces, xnnpack says what to install."""
    out = tmp_path / "noet.json"
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "executorch" or name.startswith("executorch."):
                    raise ImportError("blocked for the test: " + name)
                return None
        sys.meta_path.insert(0, Block())
        import etlens
        from etlens.demos import get_demo
        from etlens.errors import BackendUnavailableError
        t = etlens.trace_passes(*get_demo("mlp"), backend="aten", output={str(out)!r})
        assert [s.name for s in t.snapshots] == ["export", "run_decompositions"], t.snapshots
        assert all(n.debug_handles for n in t["run_decompositions"].graph if n.kind == "op")
        try:
            etlens.trace_passes(*get_demo("mlp"), backend="xnnpack")
        except BackendUnavailableError as e:
            print("UNAVAILABLE:", e)
        assert etlens.read({str(out)!r}).trace.backend == "aten"
        assert not any(m == "executorch" or m.startswith("executorch.") for m in sys.modules)
        print("OK")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK" in proc.stdout
    assert "UNAVAILABLE: backend 'xnnpack' is not available" in proc.stdout
    assert "pip install" in proc.stdout


def test_backend_registry():
    from etlens.errors import BackendUnavailableError, EtlensError
    from etlens.builder.backends import BackendConfig, available_backends, backend_names, get_backend, register_backend

    assert {"aten", "xnnpack", "cortex_m", "cadence", "vulkan", "qnn"} <= set(backend_names())
    assert available_backends()["aten"] is None
    cfg = register_backend(BackendConfig(name="needs_missing_pkg", requires=["no_such_pkg_etlens"],
                                         install_hint="pip install no-such-pkg"))
    assert get_backend("needs_missing_pkg") is cfg
    with pytest.raises(BackendUnavailableError, match="cannot import no_such_pkg_etlens.*pip install no-such-pkg"):
        cfg.check_available()
    with pytest.raises(EtlensError, match="already registered"):
        register_backend(BackendConfig(name="needs_missing_pkg"))
    with pytest.raises(EtlensError, match="unknown backend 'nope'"):
        get_backend("nope")
