"""Format sniffing: magic bytes first, extension second, clear errors otherwise."""

from __future__ import annotations

import zipfile

import pytest

from etlens.errors import MissingDataError, UnsupportedFormatError
from etlens.readers import sniff


def test_sniff_committed_artifacts(committed):
    case = committed["mlp_xnnpack"]
    assert sniff(case.pte).format == "pte"
    assert sniff(case.etdump).format == "etdump"
    assert sniff(case.etrecord).format == "etrecord"
    assert sniff(case.pt2).format == "pt2"


def test_magic_beats_extension(committed, tmp_path):
    renamed = tmp_path / "model.etdp"
    renamed.write_bytes(open(committed["mlp_xnnpack"].pte, "rb").read())
    assert sniff(renamed).format == "pte"


def test_unknown_file(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello")
    with pytest.raises(UnsupportedFormatError, match="notes.txt"):
        sniff(p)


def test_zip_that_is_neither(tmp_path):
    p = tmp_path / "x.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("readme.txt", "hi")
    with pytest.raises(UnsupportedFormatError):
        sniff(p)


def test_missing_and_directory(tmp_path):
    with pytest.raises(MissingDataError, match="no such file"):
        sniff(tmp_path / "nope.pte")
    with pytest.raises(MissingDataError, match="directory"):
        sniff(tmp_path)
