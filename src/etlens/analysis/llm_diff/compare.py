"""``llm_diff``: two builds of one LLM (or a build and its float source) run on the same tokens and compared.

Each side is a ``.pte`` (run in the build worker's child, job ``llm-run``: teacher forcing, one
position per call with a KV cache; :mod:`etlens.builder.jobs_llm`) or a float checkpoint +
params.json (ExecuTorch's Llama definition run in PyTorch, :mod:`.eager`). Then:

1. the two builds must be comparable: the same vocabulary (logits width), the same number of
   layers (KV-cache updates per call, or the ETRecords' ``layers.N``); otherwise one
   :class:`~etlens.errors.EtlensError` line naming what differs, before anything is written;
2. token statistics per position and the llama.cpp summary (:mod:`.metrics`);
3. with an ETRecord for each ``.pte`` side (given, or ``etrecord.bin`` / ``<stem>.etrecord`` next
   to it), the intermediate outputs of each run mapped to module paths (:mod:`.capture`) and
   compared module x position, with the first divergent layer (:mod:`.layers`);
4. the KV caches by position: the K and V rows each layer wrote for every token (:mod:`.kv`);
5. with ``generate=N``, free-running greedy decoding: each side decodes ``N`` tokens after the
   prompt on its own (its own argmax fed back; ``.pte`` sides in the child, a float source in
   PyTorch), and where the two generated sequences first differ;
6. phases per build: load, time to first token, decode tokens/s (the child's clocks, and the
   ETDump's ``Method::execute`` spans when there is a dump).

Example::

    from etlens.analysis.llm_diff.compare import llm_diff, Side
    res = llm_diff(Side("fp32.pte"), Side("q8.pte"), tokens)
    res.summary["kld_mean"], res.summary["first_divergent_layer"]
    res.to_json()     # what ``etlens llm-diff --format json`` writes
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ...errors import EtlensError
from .kv import KvTable, compare_kv, kv_of
from .layers import DEFAULT_ABS_FLOOR, DEFAULT_RATIO, LayerTable, compare_layers
from .metrics import DEFAULT_TOPK, position_stats, summarize

__all__ = ["Side", "LlmDiffResult", "llm_diff", "find_etrecord", "read_tokens", "pte_facts"]

_CHECKPOINT_EXT = (".pth", ".pt", ".bin.pth")


@dataclass
class Side:
    """One build: a ``.pte`` (+ optional ETRecord), or a float ``checkpoint`` with its ``params`` json."""

    path: str
    etrecord: Optional[str] = None
    params: Optional[str] = None
    label: str = ""

    @property
    def is_checkpoint(self) -> bool:
        return self.path.endswith(_CHECKPOINT_EXT) or self.params is not None and not self.path.endswith(".pte")


@dataclass
class LlmDiffResult:
    """Everything ``etlens llm-diff`` reports; :meth:`to_json` is its JSON output."""

    summary: dict[str, Any]
    positions: list[dict[str, Any]]
    tokens: list[int]
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)
    layers: Optional[LayerTable] = None
    layer_note: Optional[str] = None
    kv: Optional[KvTable] = None
    generation: Optional[dict[str, Any]] = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        def clean(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v

        return clean({"summary": self.summary, "positions": self.positions, "builds": self.builds,
                      "layers": self.layers.to_json() if self.layers is not None else None,
                      "layer_note": self.layer_note, "kv_cache": self.kv.to_json() if self.kv is not None else None,
                      "generation": self.generation, "tokens": self.tokens, "seconds": round(self.seconds, 3)})


def read_tokens(path: str) -> list[int]:
    """Whitespace- (or comma-) separated token ids from ``path``; an error names the first bad entry."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(16 << 20)
    except OSError as exc:
        raise EtlensError(f"{path}: cannot read the tokens file ({exc.strerror})") from None
    out = []
    for i, word in enumerate(re.split(r"[\s,]+", text.strip())):
        if not word:
            continue
        if not re.fullmatch(r"\d+", word):
            raise EtlensError(f"{path}: entry {i + 1} is {word[:20]!r}, not a token id (whitespace-separated "
                              "non-negative integers)")
        out.append(int(word))
    if len(out) < 2:
        raise EtlensError(f"{path}: {len(out)} token(s); give at least 2 (each position predicts the next)")
    return out


def find_etrecord(pte: str) -> Optional[str]:
    """The ETRecord next to a ``.pte``: ``<stem>.etrecord``, ``<stem>.etrecord.bin``, ``etrecord.bin``, or the
    directory's only file with "etrecord" in its name."""
    stem, d = os.path.splitext(pte)[0], os.path.dirname(os.path.abspath(pte))
    for cand in (stem + ".etrecord", stem + ".etrecord.bin", stem + "_etrecord.bin", os.path.join(d, "etrecord.bin")):
        if os.path.isfile(cand):
            return cand
    others = [f for f in os.listdir(d) if "etrecord" in f.lower() and os.path.isfile(os.path.join(d, f))]
    return os.path.join(d, others[0]) if len(others) == 1 else None  # the one ETRecord of the directory


def pte_facts(path: str) -> dict[str, Any]:
    """What makes two builds comparable, read from the ``.pte`` alone (etlens' reader, no runtime).

    ``vocab`` (last dimension of ``forward``'s first output), ``inputs`` (sizes), ``kv_updates``
    (``llama::update_cache`` calls per ``forward``: 2 per layer with ExecuTorch's KV cache),
    ``operators`` (names), ``layers`` (``kv_updates / 2`` when known), ``metadata`` (what the
    program's constant methods return: ``get_max_seq_len``, ``use_kv_cache`` ... as ``export_llama``
    writes them) and ``max_seq_len`` (positions the KV cache holds, when the program says).
    """
    from ...readers.pte import read

    try:
        art = read(path)
    except EtlensError:
        raise
    except Exception as exc:  # noqa: BLE001 - a file that does not parse is the user's input
        raise EtlensError(f"{path}: not a readable .pte ({type(exc).__name__}: {exc})") from None
    plans = [p for p in art.program.execution_plan if p.name == "forward"]
    if not plans:
        raise EtlensError(f"{path}: no 'forward' method (methods: "
                          f"{', '.join(p.name for p in art.program.execution_plan)}); not an LLM build")
    fw = plans[0]

    def sizes(vid: int) -> Optional[list[int]]:
        v = fw.values[vid]
        return [int(s) for s in v.val.sizes] if v.kind == "tensor" else None

    outs = [sizes(o) for o in fw.outputs]
    ins = [sizes(i) for i in fw.inputs]
    ops = [op.name for op in fw.operators]
    kv = 0
    for chain in fw.chains:
        for ins_ in chain.instructions:
            if ins_.kind == "KernelCall" and "update_cache" in fw.operators[ins_.op_index].name:
                kv += 1
    vocab = outs[0][-1] if outs and outs[0] else None
    meta: dict[str, Any] = {}
    for plan in art.program.execution_plan:  # constant methods: no instruction, one scalar output
        if plan.name != "forward" and len(plan.outputs) == 1 and not any(c.instructions for c in plan.chains):
            v = plan.values[plan.outputs[0]]
            if v.kind in ("int", "bool", "double"):
                meta[plan.name] = v.val
    return {"vocab": vocab, "inputs": ins, "outputs": outs, "operators": ops, "kv_updates": kv,
            "layers": kv // 2 if kv else None, "methods": [p.name for p in art.program.execution_plan],
            "metadata": meta, "max_seq_len": meta.get("get_max_seq_len")}


def _check_fits(facts: dict[str, Any], path: str, n: int, generate: int) -> None:
    """The prompt (and ``generate`` more tokens) fit the build: its KV cache, or its input without one."""
    ins = facts.get("inputs") or []
    more = f" + {generate} to generate" if generate else ""
    if len(ins) == 2:  # tokens + input_pos: a KV cache
        cap = facts.get("max_seq_len")
        if cap and n + generate > cap:
            raise EtlensError(f"{path}: {n} prompt tokens{more} exceed the KV cache's {cap} positions "
                              f"(--generate at most {max(cap - n, 0)}, or a shorter prompt)")
    elif len(ins) == 1 and ins[0] and len(ins[0]) == 2 and n + max(generate - 1, 0) > ins[0][1]:
        raise EtlensError(f"{path}: {n} prompt tokens{more} exceed the {ins[0][1]} tokens the program takes per "
                          f"call (no KV cache; --generate at most {max(ins[0][1] - n + 1, 0)})")


def _comparable(a: dict[str, Any], b: dict[str, Any], na: str, nb: str) -> None:
    if a.get("vocab") and b.get("vocab") and a["vocab"] != b["vocab"]:
        raise EtlensError(f"not comparable: vocabulary {a['vocab']} ({na}) vs {b['vocab']} ({nb})")
    if a.get("layers") and b.get("layers") and a["layers"] != b["layers"]:
        raise EtlensError(f"not comparable: {a['layers']} layers ({na}) vs {b['layers']} layers ({nb})")


def _phases_from_etdump(path: str) -> Optional[dict[str, Any]]:
    """Per ``forward`` call, the ``Method::execute`` span of the ETDump (ms); None without one."""
    from ...readers.etdump import PROFILE, read_etdump

    try:
        dump = read_etdump(path)
    except Exception:  # noqa: BLE001 - phases are extra; the comparison does not depend on them
        return None
    ids = {i for i, s in enumerate(dump.strings) if s == "Method::execute"}
    spans = []
    for run in dump.runs:
        sel = np.flatnonzero((run.kind == PROFILE) & np.isin(run.name_id, list(ids)))
        if sel.size:
            i = sel[-1]
            spans.append((int(run.end_time[i]) - int(run.start_time[i])) / 1e6)
    return {"execute_ms": spans} if spans else None


def _phases(res: dict[str, Any], etdump_ms: Optional[list[float]]) -> dict[str, Any]:
    calls = etdump_ms or res.get("call_ms") or []
    decode = calls[1:] if res.get("mode") == "kv" else []
    return {"source": "etdump" if etdump_ms else "wall clock", "load_ms": res.get("load_ms"),
            "first_token_ms": calls[0] if calls else None,
            "decode_tokens_per_s": (len(decode) / (sum(decode) / 1e3)) if decode and sum(decode) > 0 else None,
            "prefill_ms": res.get("prefill_ms"), "prefill_tokens": res.get("prefill_tokens"),
            "mode": res.get("mode"), "calls": len(calls)}


def llm_diff(base: Side, new: Side, tokens: Sequence[int], *, layers: bool = True, topk: int = DEFAULT_TOPK,
             ratio: float = DEFAULT_RATIO, abs_floor: float = DEFAULT_ABS_FLOOR, worker: Any = None,
             progress: Optional[Callable[[str], Any]] = None, keep: Optional[str] = None,
             generate: int = 0) -> LlmDiffResult:
    """Run both sides on ``tokens`` and compare them (see the module docstring).

    ``layers=False`` skips the intermediate outputs (token statistics only, faster). ``keep``: a
    directory where each ``.pte`` side's ETDump and debug buffer are kept (else a temporary one).
    ``generate``: tokens each side decodes greedily on its own after ``tokens`` (0: none).
    """
    t0 = time.perf_counter()
    tokens = [int(t) for t in tokens]
    if generate < 0:
        raise EtlensError(f"--generate {generate}: give a number of tokens (0 or more)")
    say = progress or (lambda _msg: None)
    sides = {"base": base, "new": new}
    facts: dict[str, dict[str, Any]] = {}
    for name, side in sides.items():
        if not os.path.isfile(side.path):
            raise EtlensError(f"{side.path}: no such file ({name} build)")
        if side.is_checkpoint:
            if not side.params:
                raise EtlensError(f"{side.path}: a checkpoint needs its params.json (--params)")
            from .eager import load_params

            p = load_params(side.params)
            facts[name] = {"vocab": p.get("vocab_size"), "layers": p.get("n_layers"), "kind": "checkpoint"}
        else:
            facts[name] = {**pte_facts(side.path), "kind": "pte"}
            if side.etrecord is None:
                side.etrecord = find_etrecord(side.path)
            if side.etrecord is not None and not os.path.isfile(side.etrecord):
                raise EtlensError(f"{side.etrecord}: no such file ({name} build's ETRecord)")
    _comparable(facts["base"], facts["new"], base.path, new.path)
    for name, side in sides.items():
        if facts[name]["kind"] == "pte":
            _check_fits(facts[name], side.path, len(tokens), generate)
    for name in sides:
        v = facts[name].get("vocab")
        if v and max(tokens) >= v:
            raise EtlensError(f"token id {max(tokens)} is outside the vocabulary of {sides[name].path} ({v} ids)")

    runs: dict[str, dict[str, Any]] = {}
    owned = worker is None
    tmp = tempfile.TemporaryDirectory(prefix="etlens-llmdiff-") if keep is None else None
    out_dir = keep or (tmp.name if tmp else ".")
    os.makedirs(out_dir, exist_ok=True)
    try:
        for name, side in sides.items():
            if side.is_checkpoint:
                continue
            if worker is None:
                from ...builder.worker import Worker

                worker = Worker(prewarm=["executorch.extension.pybindings.portable_lib"])
            from ...builder.jobs_llm import llm_run

            want_layers = layers and side.etrecord is not None
            etdp = os.path.join(out_dir, f"{name}.etdp")
            dbg = os.path.join(out_dir, f"{name}.debug.bin") if want_layers else None
            say(f"running {name} ({os.path.basename(side.path)}, {len(tokens)} tokens)")
            res = llm_run(worker, side.path, tokens, etdump=etdp, debug=dbg, generate=generate)
            res.update(etdump=etdp, debug=dbg)
            runs[name] = res
    finally:
        if owned and worker is not None:
            worker.close()
    for name, side in sides.items():
        if side.is_checkpoint:
            from .eager import run_eager

            say(f"running {name} (float source {os.path.basename(side.path)})")
            er = run_eager(side.path, side.params or "", tokens)
            runs[name] = {"logits": er.logits, "mode": "eager", "eager": er}
            if generate:
                from .eager import greedy_eager

                runs[name]["generated"] = greedy_eager(side.path, side.params or "", tokens, generate)
    la, lb = runs["base"]["logits"], runs["new"]["logits"]
    if la.shape[-1] != lb.shape[-1]:
        raise EtlensError(f"not comparable: vocabulary {la.shape[-1]} ({base.path}) vs {lb.shape[-1]} ({new.path})")
    rows = position_stats(la, lb, tokens, k=topk)
    summary = summarize(rows)
    table, note, kv = None, None, None
    if layers:
        say("comparing layers")
        table, note, kv = _layer_table(sides, runs, len(tokens), ratio, abs_floor)
    generation = _generation(runs, len(tokens), generate) if generate else None
    summary["greedy_first_divergence"] = generation["first_divergence"] if generation else None
    summary["first_divergent_layer"] = table.first_divergent if table is not None else None
    summary["first_divergent_layer_index"] = table.first_divergent_layer_index if table is not None else None
    builds = {}
    for name, side in sides.items():
        r = runs[name]
        b: dict[str, Any] = {"path": side.path, "etrecord": side.etrecord, "kind": facts[name]["kind"],
                             "vocab": facts[name].get("vocab"), "layers": facts[name].get("layers")}
        if "call_ms" in r:
            spans = _phases_from_etdump(r["etdump"]) if r.get("etdump") and os.path.exists(r["etdump"]) else None
            b["phases"] = _phases(r, spans["execute_ms"] if spans else None)
            b["mode"] = r.get("mode")
        builds[name] = b
    if tmp is not None:
        tmp.cleanup()
    return LlmDiffResult(summary=summary, positions=rows, tokens=tokens, builds=builds, layers=table,
                         layer_note=note, kv=kv, generation=generation, seconds=time.perf_counter() - t0)


def _generation(runs: dict[str, dict[str, Any]], n: int, steps: int) -> dict[str, Any]:
    """Both sides' greedy continuations and the first step where they differ (``None``: identical)."""
    a, b = list(runs["base"].get("generated") or []), list(runs["new"].get("generated") or [])
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    return {"steps": steps, "prompt_tokens": n, "base": a, "new": b, "first_divergence": first,
            "first_divergence_position": None if first is None else n + first,
            "same_tokens": sum(x == y for x, y in zip(a, b)),
            "feeding": "each side decodes on its own: its argmax at each step is its next input"}


def _layer_table(sides: dict[str, Side], runs: dict[str, dict[str, Any]], n: int, ratio: float,
                 abs_floor: float) -> tuple[Optional[LayerTable], Optional[str], Optional[KvTable]]:
    from .capture import capture_modules

    acts: dict[str, dict[str, np.ndarray]] = {}
    orders: dict[str, list[str]] = {}
    ops: dict[str, str] = {}
    for name, side in sides.items():
        r = runs[name]
        if "eager" in r:
            acts[name], orders[name] = r["eager"].activations, r["eager"].order
            continue
        if side.etrecord is None:
            return None, (f"layer attribution needs the {name} build's ETRecord (export_llama --generate_etrecord; "
                          f"pass --etrecord-{name}): token statistics only"), None
        if not r.get("debug") or not os.path.exists(r["debug"]):
            return None, f"the {name} build logged no intermediate outputs", None
        try:
            cap = capture_modules(r["etdump"], side.etrecord, r["debug"], r["runs"], n)
        except EtlensError as exc:  # the token statistics stand without the layer table
            return None, f"no layer table: {exc}", None
        acts[name], orders[name] = cap.values, cap.order
        for m, op in cap.ops.items():
            ops.setdefault(m, f"{name}: {op}")
    la = sum(1 for m in orders["base"] if re.fullmatch(r"layers\.\d+", m))
    lb = sum(1 for m in orders["new"] if re.fullmatch(r"layers\.\d+", m))
    if la and lb and la != lb:
        raise EtlensError(f"not comparable: {la} layers ({sides['base'].path}) vs {lb} layers ({sides['new'].path})")
    order = [m for m in orders["base"] if m in acts["new"] and kv_of(m) is None]
    if not order:
        return None, "the two builds share no module path in their intermediate outputs", None
    table = compare_layers(acts["base"], acts["new"], order, ratio=ratio, abs_floor=abs_floor, ops=ops)
    return table, None, compare_kv(acts["base"], acts["new"], abs_floor=abs_floor)
