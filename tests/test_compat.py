"""The facade (``etlens.compat``) reads programs and files; the views below it take Graph objects only."""

from __future__ import annotations

import pytest

from etlens.errors import EtlensError


def test_generate_html_reads_programs_and_the_view_refuses_them(tmp_path):
    import torch

    import etlens
    from etlens.demos import get_demo
    from etlens.views.html import generate_html as view_generate_html

    model, inputs = get_demo("mlp")
    ep = torch.export.export(model, inputs)
    out = etlens.generate_html(ep, tmp_path / "ep.html", title="ep")
    assert "etlens-data" in open(out, encoding="utf-8").read()
    out = etlens.generate_html({"a": ep, "b": etlens.extract_from_exported_program(ep)}, tmp_path / "cmp.html")
    assert "etlens-data" in open(out, encoding="utf-8").read()
    with pytest.raises(EtlensError, match="etlens.generate_html"):
        view_generate_html(ep, tmp_path / "no.html")


def test_public_viewer_names_come_from_the_facade():
    import etlens
    import etlens.compat as compat

    for name in ("generate_html", "generate_multi_pass_html", "extract_from_pte", "extract_from_etrecord",
                 "extract_from_exported_program", "visualize_edge_manager"):
        assert getattr(etlens, name) is getattr(compat, name)
