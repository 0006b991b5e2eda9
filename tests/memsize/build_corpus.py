"""Lower a few real architectures of ``tests/corpus/models.py`` (fp32 and int8, XNNPACK) to ``.pte``.

``python tests/memsize/build_corpus.py OUT_DIR [arch ...]`` writes ``<arch>_<fp32|int8>.pte`` and a
``manifest.json``; the memory/size tests read them from the fixture cache (built once per source hash).
"""

from __future__ import annotations

import json
import os
import sys

ARCHS = ("resnet", "vit", "convnext")  # token-id models (bert, gpt2) do not pt2e-quantize here


def main(out: str, archs: list[str]) -> None:
    from etlens.builder.pipeline import lower
    from tests.corpus import models

    os.makedirs(out, exist_ok=True)
    done = {}
    for arch in archs:
        for quant in (False, True):
            module, inputs = getattr(models, arch)()
            _, _, et = lower(module.eval(), inputs, backend="xnnpack", quant=quant)
            name = f"{arch}_{'int8' if quant else 'fp32'}.pte"
            with open(os.path.join(out, name), "wb") as f:
                f.write(et.buffer)
            done[f"{arch}_{'int8' if quant else 'fp32'}"] = name
            print("built", name, flush=True)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(done, f)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(sys.argv[1], sys.argv[2:] or list(ARCHS))
