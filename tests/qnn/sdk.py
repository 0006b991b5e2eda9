"""A ``QNN_SDK_ROOT`` on x86-64 Linux, made at test time from the ``onnxruntime-qnn`` 2.7.0 wheel.

The QAIRT SDK cannot be installed here; the onnxruntime-qnn wheel ships QNN 2.51's x86-64 libraries
(the HTP simulator is inside ``libQnnHtp.so``). They are under Qualcomm's license: fetched with pip when
the tests build their fixtures, never committed. :func:`ensure_sdk` lays them out as ExecuTorch
expects (``lib/x86_64-linux-clang/``) and puts the shim built from ``qnn_htp_shim.c`` in front of the
real ``libQnnHtp.so`` (see that file for why ExecuTorch 1.5.1 needs it with QNN 2.51).

Processes that lower or run QNN programs need ``QNN_SDK_ROOT`` and ``LD_LIBRARY_PATH`` set before they
start (the dynamic loader reads ``LD_LIBRARY_PATH`` once): :func:`env` gives both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

WHEEL = "onnxruntime-qnn==2.7.0"
HERE = Path(__file__).resolve().parent
SHIM = HERE / "qnn_htp_shim.c"
LIB = "lib/x86_64-linux-clang"
# wheel member -> name in the SDK's lib folder
_LIBS = {
    "onnxruntime_qnn/libQnnHtp.so": "libQnnHtpReal.so",
    "onnxruntime_qnn/libHtpPrepare.so": "libQnnHtpPrepare.so",
    "onnxruntime_qnn/libQnnSystem.so": "libQnnSystem.so",
}


def _fetch(cache: Path) -> Path:
    """Download and unpack the wheel's libraries once into ``cache`` (shared by every corpus build)."""
    from filelock import FileLock

    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache / ".lock")):
        if not (cache / "done").exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL,
                            "-d", str(cache)], check=True)
            wheel = next(cache.glob("onnxruntime_qnn-*.whl"))
            with zipfile.ZipFile(wheel) as z:
                for member in z.namelist():
                    if member in _LIBS or member.startswith("onnxruntime_qnn.libs/"):
                        z.extract(member, cache)
            wheel.unlink()
            (cache / "done").write_text("ok")
    return cache


def _place(src: Path, dst: Path) -> None:
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def ensure_sdk(root: Path, cache: Path | None = None) -> Path:
    """Make ``root`` a QNN_SDK_ROOT (libraries + shim) and return it; idempotent."""
    root = Path(root)
    lib = root / LIB
    if (lib / "libQnnHtp.so").exists() and (root / "done").exists():
        return root
    cache = cache or Path(os.environ.get("ETLENS_FIXTURE_CACHE", root.parent)) / "qnn-wheel-2.7.0"
    wheel = _fetch(cache)
    lib.mkdir(parents=True, exist_ok=True)
    for member, name in _LIBS.items():
        _place(wheel / member, lib / name)
    for dep in (wheel / "onnxruntime_qnn.libs").iterdir():
        _place(dep, lib / dep.name)
    # libHtpPrepare's RPATH is $ORIGIN/../onnxruntime_qnn.libs
    link = root / "lib" / "onnxruntime_qnn.libs"
    if not link.exists():
        link.symlink_to("x86_64-linux-clang")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Wl,-z,nodelete", "-Wl,-soname,libQnnHtp.so",
                    "-o", str(lib / "libQnnHtp.so"), str(SHIM), "-ldl"], check=True)
    (root / "done").write_text("ok")
    return root


def env(root: Path, base: dict | None = None) -> dict:
    """The environment of a process that lowers or runs QNN programs with the SDK at ``root``."""
    e = dict(os.environ if base is None else base)
    lib = str(Path(root) / LIB)
    e["QNN_SDK_ROOT"] = str(root)
    e["LD_LIBRARY_PATH"] = os.pathsep.join([lib] + ([e["LD_LIBRARY_PATH"]] if e.get("LD_LIBRARY_PATH") else []))
    return e
