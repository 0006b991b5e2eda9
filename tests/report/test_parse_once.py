"""A report reads and parses each of its files once, and every analysis uses that one parse.

The Inspector, the numerics, the delegation table (ETRecord + the ``.pte``'s kernel list), the
attribution inside delegates, the lowered-program graph, planned memory, the size treemap and the
runtime allocations all need the same ``.etrecord`` / ``.pte`` / ``.etdp``; before
:class:`etlens.readers.artifacts.ArtifactSet` a report parsed the ETRecord 3 times, the ETDump 2
times and the ``.pte`` 6 times. Every reader entry point is counted here, per file.
"""

from __future__ import annotations

import collections
import os

import pytest


def _count_reads(monkeypatch) -> collections.Counter:
    import etlens.readers.base as base
    import etlens.readers.etdump as etdump
    import etlens.readers.etrecord as etrecord
    import etlens.readers.pte as pte
    import etlens.readers.registry as registry

    counts: collections.Counter = collections.Counter()

    def counting(mod, name, kind):
        real = getattr(mod, name)

        def wrapper(source, *args, **kwargs):
            where = os.path.basename(kwargs.get("name") or (source if isinstance(source, (str, os.PathLike)) else ""))
            counts[(kind, str(where))] += 1
            return real(source, *args, **kwargs)

        monkeypatch.setattr(mod, name, wrapper)

    counting(etrecord, "read", "parse etrecord")
    counting(pte, "read_pte_bytes", "parse pte")
    counting(etdump, "read_etdump", "parse etdump")
    counting(registry, "read", "registry read")
    counting(base, "read_limited", "read file")
    return counts


@pytest.mark.parametrize("case", ["cnn_xnnpack", "cnn_q8_xnnpack"])
def test_a_report_parses_each_artifact_once(artifacts, case, tmp_path, monkeypatch):
    from etlens.report import report_from_artifacts

    a = artifacts[case]
    counts = _count_reads(monkeypatch)
    res = report_from_artifacts(a.etdump, str(tmp_path / "r.html"), etrecord=a.etrecord, debug_buffer=a.debug_buffer,
                                pte=a.pte)
    twice = {k: n for k, n in counts.items() if n > 1}
    assert not twice, f"parsed more than once per report: {twice}"
    kinds = {k for k, _ in counts}
    # the report did read all three (not skipped): each parsed exactly once, the .pte's bytes read once
    assert {"parse etrecord", "parse pte", "parse etdump"} <= kinds, counts
    assert res.data.artifacts.parses == {"etrecord": 1, "etdump": 1, "pte bytes": 1, "pte": 1}
    # and the sections that need them are there (a report that skipped them would parse less)
    assert res.data.delegation is not None and res.data.attribution is not None and res.data.gap_df is not None
    html = open(res.path, encoding="utf-8").read()
    for section in ("Lowered program (.pte)", "Planned memory", "Where the bytes go"):
        assert section in html
