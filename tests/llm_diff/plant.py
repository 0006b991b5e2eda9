"""A planted single-layer fault written straight into a real fp32 ``.pte``: no export per fault seed.

An fp32 ``export_llama -X`` build keeps every linear's weight verbatim (the checkpoint's float32
bytes, once each, in the XNNPACK delegate's constant data, named by the SHA-256 of those bytes).
:func:`planted_pte` finds the faulted weight's bytes in the base build, scales them as
:func:`tests.llm_diff.build.disturbed` scales the checkpoint (``float32 * factor``) and renames the
key to the new bytes' SHA-256: the file is then the program ``export_llama`` makes from the disturbed
checkpoint, byte for byte (checked on 2026-11-27 against an exported build of fault seed 1, which
the corpus then stopped exporting). The base build's ETRecord serves the planted one (same graph,
same debug handles).
"""

from __future__ import annotations

import hashlib
import os
import shutil

import numpy as np


def planted_pte(base_dir: str, fault: dict, out_dir: str) -> str:
    """``out_dir/model.pte`` (+ the base's ``etrecord.bin``): ``base_dir``'s build with ``fault`` planted."""
    import torch

    state = torch.load(os.path.join(base_dir, "checkpoint.pth"), weights_only=True)
    key = f"layers.{fault['layer']}.{fault['weight']}.weight"
    w = state[key].float()
    old = w.numpy().tobytes()
    new = (w * fault["scale"]).numpy().astype(np.float32).tobytes()
    with open(os.path.join(base_dir, "model.pte"), "rb") as f:
        data = f.read()
    if data.count(old) != 1:
        raise RuntimeError(f"{key}: found {data.count(old)} times in the .pte (a planted fault needs exactly one)")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model.pte")
    data = data.replace(old, new)
    data = data.replace(hashlib.sha256(old).hexdigest().encode(), hashlib.sha256(new).hexdigest().encode())
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
