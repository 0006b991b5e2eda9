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


def compile_one(name: str, target: str, out: str, trace: bool = False) -> dict:
    """Compile one model; with ``trace`` also record the Arm backend's passes inside its preprocess
    (``etlens.passes.preprocess``, what ``etlens trace`` / the report record) into ``<stem>.trace.json``
    during the same compile."""
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from etlens.backends.ethosu.build import (VelaCapture, ethosu_edge_compile_config, ethosu_partitioner,
                                              ethosu_quantizer, write_sidecar)
    from etlens.builder import histogram_search
    from tests.ethosu.models import MODELS

    histogram_search.install()  # the same ranges as the Arm quantizer's own observers, minutes faster

    t0 = time.time()
    model, inputs = MODELS[name]()
    gm = torch.export.export(model, inputs).module(check_guards=False)
    prepared = prepare_pt2e(gm, ethosu_quantizer(target))
    prepared(*inputs)
    ep = torch.export.export(convert_pt2e(prepared), inputs)
    stem = os.path.join(out, f"{name}-{target}")

    def lower():
        return to_edge_transform_and_lower(ep, partitioner=[ethosu_partitioner(target)],
                                           compile_config=ethosu_edge_compile_config(), generate_etrecord=True)

    files = {}
    with VelaCapture(target) as cap:
        if trace:
            from etlens.builder.backends import get_backend
            from etlens.passes import snapshot as snap
            from etlens.passes.preprocess import observed_stage
            from etlens.passes.tracer import PipelineTracer

            t = PipelineTracer(get_backend(target), name, show_progress=False)
            t.add("export", "export", snap.program_graph(ep, "export", "export", t.ids), 0.0)
            edge = observed_stage(t, t.backend, "lower", "lower", lower,
                                  lambda m, n: snap.program_graph(m, n, "lower", t.ids))
            t.trace.save(stem + ".trace.json")
            if edge is None:
                raise RuntimeError(f"{name}@{target}: {t.error}")
            files["trace"] = f"{name}-{target}.trace.json"
        else:
            edge = lower()
    et = edge.to_executorch()
    with open(stem + ".pte", "wb") as f:
        f.write(et.buffer)
    et.get_etrecord().save(stem + ".etrecord")
    write_sidecar(cap, stem + ".pte")
    with open(stem + ".vela.txt", "w") as f:
        f.write("".join(p["stdout"] for p in cap.partitions))
    return {"pte": f"{name}-{target}.pte", "etrecord": f"{name}-{target}.etrecord",
            "vela": f"{name}-{target}.vela.json", "stdout": f"{name}-{target}.vela.txt",
            **files, "seconds": round(time.time() - t0, 2)}


#: The ``ethosu_corpus`` builds. The CNN is not rebuilt (the ``ethosu_small`` fixture has it for both
#: targets); the transformer block — whose role is the operators the NPU does not take, with the
#: partitioner's reasons, the same on every target — is compiled for the U55 only (its compile is the
#: slowest of the corpus, ~7 min per target on a loaded 2-core machine); the DS-CNN goes to the U55
#: and the U65 (``Dedicated_Sram``: scratch in DRAM, the fast scratch in SRAM), MobileNet and ResNet
#: to the U55 and U85.
CORPUS = ("ds_cnn@ethos-u55-128", "ds_cnn@ethos-u65-256", "mobilenet", "resnet", "transformer@ethos-u55-128")


def main(argv: list[str]) -> int:
    out = argv[0]
    os.makedirs(out, exist_ok=True)

    # the small set (one CNN, both targets) for the fast tests: build_once names its output after the prefix
    small = os.path.basename(os.path.normpath(out)).startswith("ethosu_small")
    wanted = argv[1:] or (["cnn"] if small else list(CORPUS))
    manifest_path = os.path.join(out, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    for item in wanted:
        name, _, target = item.partition("@")
        for t in [target] if target else ["ethos-u55-128", "ethos-u85-256"]:
            manifest[f"{name}@{t}"] = compile_one(name, t, out, trace=small)
            with open(manifest_path, "w") as f:
                json.dump(manifest, f, indent=1)
            print(f"{name}@{t}: {manifest[f'{name}@{t}']['seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    raise SystemExit(main(sys.argv[1:]))
