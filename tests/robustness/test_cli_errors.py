"""CLI: every subcommand given a truncated or wrong-type file prints one ``etlens: error:`` line.

Runs ``etlens.cli.main.main([...])`` in-process and checks the exit status (1), that stderr is a
single line starting ``etlens: error:``, and that no traceback leaks.
"""

from __future__ import annotations

import pytest

from tests.robustness import _harness as H
from etlens.cli.main import main

D = H.DATA


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    files = {
        "trunc.pte": (D / "mlp_xnnpack.pte").read_bytes()[:1000],
        "trunc.etdp": (D / "mlp_portable.etdp").read_bytes()[:700],
        "trunc.etrecord": (D / "mlp_portable.etrecord").read_bytes()[:5000],
        "trunc.pt2": (D / "mlp_portable.pt2").read_bytes()[:3000],
        "trunc.json": H.committed_seeds()["trace"][0][1][:500],
        "image.png": b"\x89PNG\r\n\x1a\n" + bytes(64),
        "empty.pte": b"",
        "pte_named.etdp": (D / "mlp_xnnpack.pte").read_bytes(),
        "etdp_named.etrecord": (D / "mlp_portable.etdp").read_bytes(),
        "model.py": b"this is not python (\n",
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


def _cases(d, out):
    artifact_cmds = [["info"], ["info", "--json"], ["view", "-o", str(out / "v.html")], ["delegation"],
                     ["model-explorer", "-o", str(out / "me.json")]]
    for cmd in artifact_cmds:
        # (a real file under another format's extension is *valid*: magic bytes win over names)
        for f in ("trunc.pte", "trunc.etdp", "trunc.etrecord", "trunc.pt2", "trunc.json", "image.png",
                  "empty.pte"):
            yield cmd + [str(d / f)]
    for f in ("trunc.etdp", "image.png", "trunc.pte", "pte_named.etdp"):  # a real .pte is the wrong type here
        yield ["inspect", "--etdump", str(d / f)]
        yield ["report", "--etdump", str(d / f), "-o", str(out / "r.html")]
        yield ["gap", "--etdump", str(d / f), "--etrecord", str(D / "mlp_portable.etrecord"),
               "--debug-buffer", str(D / "mlp_portable.debug.bin")]
    for f in ("trunc.etrecord", "image.png", "etdp_named.etrecord"):
        yield ["inspect", "--etdump", str(D / "mlp_portable.etdp"), "--etrecord", str(d / f)]
        yield ["gap", "--etdump", str(D / "mlp_portable.etdp"), "--etrecord", str(d / f),
               "--debug-buffer", str(D / "mlp_portable.debug.bin")]
        yield ["report", "--etdump", str(D / "mlp_portable.etdp"), "--etrecord", str(d / f),
               "-o", str(out / "r.html")]
    yield ["trace", "--model", str(d / "model.py")]
    yield ["trace", "--model", str(d / "image.png")]
    yield ["view", str(d / "missing.pte"), "-o", str(out / "v.html")]


def test_every_subcommand_reports_bad_files_in_one_line(bad, tmp_path, capsys):
    problems = []
    n = 0
    for argv in _cases(bad, tmp_path):
        n += 1
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse usage errors exit 2 with usage text: a different contract
            rc = exc.code
        cap = capsys.readouterr()
        lines = [ln for ln in cap.err.splitlines() if ln.strip()]
        ok = rc == 1 and len(lines) == 1 and lines[0].startswith("etlens: error:") and "Traceback" not in cap.err
        if not ok:
            problems.append(f"{' '.join(a.replace(str(bad), '<bad>') for a in argv)} -> rc={rc}, "
                            f"stderr={cap.err[-600:]!r}")
    assert n > 50
    assert not problems, "\n".join(problems)


def test_error_line_names_the_file(bad, capsys):
    rc = main(["info", str(bad / "trunc.pte")])
    err = capsys.readouterr().err
    assert rc == 1 and "trunc.pte" in err
