"""A planted single-layer fault written straight into a real ``.pte`` (fp32 or 8da4w): no export per fault.

An fp32 ``export_llama -X`` build keeps every linear's weight verbatim (the checkpoint's float32
bytes, once each, in the XNNPACK delegate's constant data, named by the SHA-256 of those bytes).
:func:`planted_pte` finds the faulted weight's bytes in the base build, scales them as
:func:`tests.llm_diff.build.disturbed` scales the checkpoint (``float32 * factor``) and renames the
key to the new bytes' SHA-256: the file is then the program ``export_llama`` makes from the disturbed
checkpoint, byte for byte (checked on 2026-11-27 against an exported build of fault seed 1, which
the corpus then stopped exporting). The base build's ETRecord serves the planted one (same graph,
same debug handles).

An 8da4w build (``-qmode 8da4w -G 32``) keeps each linear's int4 weights and, apart, its per-group scales
(bfloat16, one named blob ``scale_<SHA-256>``). Scaling a weight by a power of two scales its groups' ranges
by it exactly, so the int4 values stay and only that blob doubles (or halves): :func:`planted_q8_pte` finds
the blob whose scales follow the weight's group maxima and rewrites it and its key (checked on 2026-11-28
against an exported 8da4w build of fault seed 0, ``layers.3.feed_forward.w2`` x2: the same bytes).
"""

from __future__ import annotations

import hashlib
import os
import shutil

import numpy as np


def _weight(base_dir: str, fault: dict):
    import torch

    state = torch.load(os.path.join(base_dir, "checkpoint.pth"), weights_only=True)
    key = f"layers.{fault['layer']}.{fault['weight']}.weight"
    return key, state[key].float().numpy()


def planted_pte(base_dir: str, fault: dict, out_dir: str) -> str:
    """``out_dir/model.pte`` (+ the base's ``etrecord.bin``): ``base_dir``'s fp32 build with ``fault`` planted."""
    key, w = _weight(base_dir, fault)
    old = w.tobytes()
    new = (w * np.float32(fault["scale"])).astype(np.float32).tobytes()
    with open(os.path.join(base_dir, "model.pte"), "rb") as f:
        data = f.read()
    if data.count(old) != 1:
        raise RuntimeError(f"{key}: found {data.count(old)} times in the .pte (a planted fault needs exactly one)")
    return _write(base_dir, out_dir, data, old, new, hashlib.sha256(old).hexdigest(), hashlib.sha256(new).hexdigest())


def planted_q8_pte(base_dir: str, fault: dict, out_dir: str, group: int = 32) -> str:
    """As :func:`planted_pte` for an 8da4w build (groups of ``group``); the factor must be a power of two."""
    import re

    factor = float(fault["scale"])
    if not factor > 0 or np.log2(factor) != round(np.log2(factor)):
        raise ValueError(f"an 8da4w fault is planted exactly only for a power-of-two factor, not {factor}")
    key, w = _weight(base_dir, fault)
    gmax = np.abs(w.reshape(w.shape[0], -1, group)).max(-1).ravel()
    with open(os.path.join(base_dir, "model.pte"), "rb") as f:
        data = f.read()
    fits = []
    names = {m.decode() for m in re.findall(rb"scale_([0-9a-f]{64})", data)}
    for name, blob in _blobs_named(data, names, 2 * gmax.size):
        scales = (np.frombuffer(blob, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        ratio = np.log(scales / np.maximum(gmax, 1e-30))
        if np.all(np.isfinite(ratio)) and ratio.max() - ratio.min() < np.log(1.25):  # int4: scale ~ max / 7.5
            fits.append((name, blob))
    if len(fits) != 1:
        raise RuntimeError(f"{key}: {len(fits)} scale blobs follow its group maxima in the .pte (need exactly one)")
    name, old = fits[0]
    bits = (np.frombuffer(old, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32) * np.float32(factor)
    new = (bits.view(np.uint32) >> 16).astype(np.uint16).tobytes()  # exact: a power of two moves the exponent
    return _write(base_dir, out_dir, data, old, new, name, hashlib.sha256(new).hexdigest())


def _blobs_named(data: bytes, names: set[str], size: int) -> list[tuple[str, bytes]]:
    """``(sha, bytes)`` of the ``size``-byte spans of ``data`` whose SHA-256 is one of ``names`` (named blobs
    start 16-byte aligned)."""
    out = []
    for i in range(0, len(data) - size + 1, 16):
        sha = hashlib.sha256(data[i:i + size]).hexdigest()
        if sha in names:
            out.append((sha, data[i:i + size]))
    return out


def _write(base_dir: str, out_dir: str, data: bytes, old: bytes, new: bytes, old_sha: str, new_sha: str) -> str:
    if data.count(old) != 1:
        raise RuntimeError(f"the planted bytes occur {data.count(old)} times in the .pte (need exactly one)")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model.pte")
    data = data.replace(old, new).replace(old_sha.encode(), new_sha.encode())
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    rec = os.path.join(out_dir, "etrecord.bin")
    if not os.path.exists(rec):
        try:
            os.link(os.path.join(base_dir, "etrecord.bin"), rec)
        except FileExistsError:
            pass
        except OSError:
            shutil.copyfile(os.path.join(base_dir, "etrecord.bin"), rec)
    return path
