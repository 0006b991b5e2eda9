"""The analysis package's shape: explicit interfaces, owned state, no imports of views."""

from __future__ import annotations

import ast
import pathlib

import etlens

ANALYSIS = pathlib.Path(etlens.__file__).parent / "analysis"


def _imports(path: pathlib.Path) -> list[str]:
    """Absolute module names imported by ``path`` (relative imports resolved)."""
    parts = list(path.relative_to(ANALYSIS.parent.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    package = parts if path.name == "__init__.py" else parts[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out += [mod] + [f"{mod}.{a.name}" for a in node.names]
    return out


def test_analysis_imports_no_higher_layer_and_no_private_reader_names():
    for path in ANALYSIS.rglob("*.py"):
        for mod in _imports(path):
            assert not mod.startswith(("etlens.views", "etlens.report", "etlens.cli", "etlens.compat")), (path, mod)
            if mod.startswith("etlens.") and not mod.startswith("etlens.analysis"):
                assert not any(p.startswith("_") for p in mod.split(".")[1:]), (path, mod)


def test_view_methods_live_on_the_facade():
    from etlens.analysis.inspector import Inspector as Base
    from etlens.compat import Inspector

    assert etlens.Inspector is Inspector and issubclass(Inspector, Base)
    for name in ("print_data_tabular", "write_tensorboard_artifact", "write_perfetto_trace", "summary_text"):
        assert hasattr(Inspector, name) and not hasattr(Base, name)


def test_reason_codes_keep_their_strings():
    from etlens.analysis.numerics.reasons import REASONS, Explanation, Reason

    assert [r.value for r in Reason] == list(REASONS)
    assert Reason.FUSED == "fused" and str(Reason.FUSED) == "fused" and f"{Reason.FUSED}" == "fused"
    row = Explanation("reference", "n", "op", (1,), "fused").to_row()
    assert type(row["reason"]) is str and row["detail"] == REASONS["fused"]


def test_comparators_say_which_way_is_better():
    from etlens.analysis.comparators import COMPARATORS

    assert {k: c.higher_is_better for k, c in COMPARATORS.items()} == {
        "MSE": False, "L1": False, "MAX_ABS": False, "SNR": True, "COSINE": True}


def test_resolver_owns_its_cache(tmp_path):
    from etlens.analysis import delegation
    from etlens.analysis.delegation import core

    assert not hasattr(core, "_PATH_CACHE")
    resolver = delegation.ProgramResolver(cache_size=1)
    g = etlens.Graph(name="g")
    assert resolver.resolve(g).graph is g
    resolver.clear()
