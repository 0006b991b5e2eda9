"""What the LLM corpora's build scripts share: ExecuTorch's ``export_llama`` on a seeded checkpoint, in a child.

Three scripts build tiny random-weight Llamas with ExecuTorch's own
``python -m executorch.examples.models.llama.export_llama``: ``tests/llm/build.py`` (the LLM corpus),
``tests/llm/build_phases.py`` (timing-only dumps) and ``tests/llm_diff/build.py`` (builds of one
checkpoint). Each runs as ``python SCRIPT OUT_DIR [name ...]`` (``build_once`` in tests/conftest.py,
whose cache key hashes the script and this module, with the checkout and ``src`` on ``PYTHONPATH``)
and calls itself back in child processes: ``SCRIPT --export NAME DIR`` (the export imports a lot and
is best left to its own process, as its CLI) and ``SCRIPT --run NAME DIR`` (the runtime can abort).

Per build directory: ``params.json`` (the ``ModelArgs``), ``checkpoint.pth`` (a freshly constructed
``Transformer``'s weights under a seed: without ``--checkpoint`` export_llama leaves the RMSNorm
scales as ``to_empty`` found them and the program computes NaN), ``model.pte`` and ``etrecord.bin``
(``--generate_etrecord``), ``export.log`` and ``run.log``. ``OUT_DIR/manifest.json`` is merged one
build at a time, so a build that fails keeps the ones before it.

Example (a script's child and parent sides)::

    def export_child(name, d):
        save_checkpoint(d, seeded_state_dict(PARAMS, 80, seed=1))
        export_llama(80, ["-kv", "--use_sdpa_with_kv_cache", "-X"])

    def build(out, name):
        d = os.path.join(out, name)
        seconds = export_then_run(__file__, name, d, PARAMS)   # or export_in_child alone
        return {"pte": f"{name}/model.pte", "build_seconds": seconds}

    script_main(sys.argv[1:], names=list(CASES), build=build, export_child=export_child, run_child=run_child)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Optional, Sequence

__all__ = ["KV_SDPA_XNNPACK", "seeded_state_dict", "save_checkpoint", "export_llama", "write_params",
           "export_in_child", "run_in_child", "export_then_run", "program_loader", "script_main"]

#: KV cache with ExecuTorch's custom ``llama::update_cache`` / ``llama::custom_sdpa`` ops, lowered to XNNPACK
KV_SDPA_XNNPACK = ["-kv", "--use_sdpa_with_kv_cache", "-X"]


def seeded_state_dict(params: dict, max_seq_len: int, seed: int) -> dict:
    """The weights of ExecuTorch's own ``Transformer`` for ``params``, constructed under ``torch.manual_seed(seed)``."""
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    torch.manual_seed(seed)
    return construct_transformer(ModelArgs(**params, max_seq_len=max_seq_len)).state_dict()


def save_checkpoint(d: str, state: dict) -> None:
    """``d/checkpoint.pth``: what export_llama's ``-c`` reads."""
    import torch

    torch.save(state, os.path.join(d, "checkpoint.pth"))


def export_llama(max_seq_len: int, flags: Sequence[str]) -> None:
    """Run ``export_llama`` in this process, as its CLI, on ``params.json`` and ``checkpoint.pth`` of the current
    directory: fp32 weights, ``max_seq_len`` for the sequence and the context, ``flags`` last (``-kv``, ``-X``,
    ``-qmode 8da4w -G 32``, ``--disable_dynamic_shape`` ...); writes ``model.pte`` and ``etrecord.bin``."""
    import runpy

    n = str(max_seq_len)
    sys.argv = ["export_llama", "--params", "params.json", "-c", "checkpoint.pth", "--generate_etrecord",
                "--max_seq_length", n, "--max_context_length", n, "--output_name", "model.pte", "-d", "fp32", *flags]
    runpy.run_module("executorch.examples.models.llama.export_llama", run_name="__main__")


def write_params(d: str, params: dict) -> None:
    """``d/params.json``: the ``ModelArgs`` export_llama's ``--params`` reads."""
    with open(os.path.join(d, "params.json"), "w") as f:
        json.dump(params, f)


def _child(script: str, step: str, name: str, d: str, log_name: str, **kwargs: Any) -> int:
    with open(os.path.join(d, log_name), "w") as log:
        return subprocess.run([sys.executable, os.path.abspath(script), step, name, d], stdout=log,
                              stderr=subprocess.STDOUT, **kwargs).returncode


def _tail(d: str, log_name: str) -> str:
    with open(os.path.join(d, log_name)) as f:
        return f.read()[-3000:]


def export_in_child(script: str, name: str, d: str) -> None:
    """``python SCRIPT --export NAME D`` in ``d`` (output to ``export.log``); SystemExit with the log's tail when it
    fails or writes no ``model.pte``."""
    code = _child(script, "--export", name, d, "export.log", cwd=d)
    if code != 0 or not os.path.exists(os.path.join(d, "model.pte")):
        raise SystemExit(f"export_llama failed for {name} (exit {code}):\n{_tail(d, 'export.log')}")


def run_in_child(script: str, name: str, d: str) -> None:
    """``python SCRIPT --run NAME D`` (output to ``run.log``, Python warnings off); SystemExit when it fails."""
    code = _child(script, "--run", name, d, "run.log", env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if code != 0:
        raise SystemExit(f"running {name} failed (exit {code}):\n{_tail(d, 'run.log')}")


def export_then_run(script: str, name: str, d: str, params: dict) -> dict[str, float]:
    """``params.json``, the export child, the run child; ``{"export": s, "run": s}`` (wall seconds, 0.1 s)."""
    os.makedirs(d, exist_ok=True)
    write_params(d, params)
    t0 = time.time()
    export_in_child(script, name, d)
    t1 = time.time()
    run_in_child(script, name, d)
    return {"export": round(t1 - t0, 1), "run": round(time.time() - t1, 1)}


def program_loader(d: str) -> Callable[..., Any]:
    """``load(**kwargs)``: a fresh runtime module of ``d/model.pte`` (ExecuTorch's pybindings, the LLM custom ops
    registered), ``kwargs`` as ``_load_for_executorch_from_buffer``'s (``enable_etdump``, ``debug_buffer_size``)."""
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  registers llama::custom_sdpa & co.
    from executorch.extension.pybindings import portable_lib as pl

    with open(os.path.join(d, "model.pte"), "rb") as f:
        buf = f.read()  # held by the closure: the runtime reads the program from this buffer, it does not copy it
    return lambda **kwargs: pl._load_for_executorch_from_buffer(buf, **kwargs)


def script_main(argv: list[str], *, names: Sequence[str], build: Callable[[str, str], dict],
                export_child: Callable[[str, str], None], run_child: Optional[Callable[[str, str], None]] = None,
                before: Optional[Callable[[str], None]] = None) -> None:
    """A build script's ``main``: ``--export NAME D`` / ``--run NAME D`` run the child steps; else
    ``OUT_DIR [name ...]`` (default: every name) runs ``before(out)``, then ``build(out, name)`` per name, merging
    each entry into ``OUT_DIR/manifest.json`` as it is built."""
    if argv and argv[0] == "--export":
        export_child(argv[1], argv[2])
        return
    if argv and argv[0] == "--run" and run_child is not None:
        run_child(argv[1], argv[2])
        return
    if not argv:
        raise SystemExit("usage: SCRIPT OUT_DIR [name ...]")
    out, todo = os.path.abspath(argv[0]), argv[1:] or list(names)
    unknown = [c for c in todo if c not in names]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {sorted(names)}")
    os.makedirs(out, exist_ok=True)
    if before is not None:
        before(out)
    path = os.path.join(out, "manifest.json")
    for name in todo:
        entry = build(out, name)
        manifest = {}
        if os.path.exists(path):
            with open(path) as f:
                manifest = json.load(f)
        manifest[name] = entry
        with open(path, "w") as f:
            json.dump(manifest, f, indent=1)
        seconds = entry["export_seconds"] if "export_seconds" in entry else sum(entry["build_seconds"].values())
        print(f"built {name} in {seconds:.0f} s", flush=True)
