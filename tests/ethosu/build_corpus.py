"""Compile the Ethos-U corpus (tests/ethosu/models.py) for ethos-u55-128 and ethos-u85-256.

``python tests/ethosu/build_corpus.py OUT [name[@target] ...]`` writes, per model and target,
``OUT/<name>-<target>.pte``, ``.etrecord``, the Vela sidecar ``.vela.json`` (with the per-partition
TOSA files) and ``manifest.json`` listing them. Every compile runs in this one process (imports once),
the way the tests' ``build_once`` calls it in a child process.
"""

from __future__ import annotations

import json
import os
import sys
import time


def compile_one(name: str, target: str, out: str) -> dict:
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from etlens.build.ethosu import (VelaCapture, ethosu_edge_compile_config, ethosu_partitioner,
                                     ethosu_quantizer, write_sidecar)
    from tests.ethosu.models import MODELS

    t0 = time.time()
    model, inputs = MODELS[name]()
    gm = torch.export.export(model, inputs).module(check_guards=False)
    prepared = prepare_pt2e(gm, ethosu_quantizer(target))
    prepared(*inputs)
    ep = torch.export.export(convert_pt2e(prepared), inputs)
    with VelaCapture(target) as cap:
        edge = to_edge_transform_and_lower(ep, partitioner=[ethosu_partitioner(target)],
                                           compile_config=ethosu_edge_compile_config(), generate_etrecord=True)
    et = edge.to_executorch()
    stem = os.path.join(out, f"{name}-{target}")
    with open(stem + ".pte", "wb") as f:
        f.write(et.buffer)
    et.get_etrecord().save(stem + ".etrecord")
    write_sidecar(cap, stem + ".pte")
    with open(stem + ".vela.txt", "w") as f:
        f.write("".join(p["stdout"] for p in cap.partitions))
    return {"pte": f"{name}-{target}.pte", "etrecord": f"{name}-{target}.etrecord",
            "vela": f"{name}-{target}.vela.json", "stdout": f"{name}-{target}.vela.txt",
            "seconds": round(time.time() - t0, 2)}


def main(argv: list[str]) -> int:
    out = argv[0]
    os.makedirs(out, exist_ok=True)
    from tests.ethosu.models import MODELS

    # the small set (one CNN, both targets) for the fast tests: build_once names its output after the prefix
    default = ["cnn"] if os.path.basename(os.path.normpath(out)).startswith("ethosu_small") else list(MODELS)
    wanted = argv[1:] or default
    manifest_path = os.path.join(out, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    for item in wanted:
        name, _, target = item.partition("@")
        for t in [target] if target else ["ethos-u55-128", "ethos-u85-256"]:
            manifest[f"{name}@{t}"] = compile_one(name, t, out)
            with open(manifest_path, "w") as f:
                json.dump(manifest, f, indent=1)
            print(f"{name}@{t}: {manifest[f'{name}@{t}']['seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    raise SystemExit(main(sys.argv[1:]))
