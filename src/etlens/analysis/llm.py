"""LLM profile: each ``forward`` run labelled prefill or decode, per-token latency, time per operator class.

An LLM exported with ExecuTorch's LLM flow (``export_llama`` / ``export_llm``: KV cache, custom
``llama::custom_sdpa`` / ``llama::update_cache`` ops) is run as a prefill (the prompt, several
tokens in one call when shapes are dynamic, or token by token) followed by decode steps (one token
per call). An ETDump does not say which run was which, but the intermediate outputs do:

- the embedding's output is ``[batch, tokens, dim]`` -> the number of tokens of the run;
- ``input_pos[0]`` is selected into a 0-d integer tensor (``select_copy``) -> the start position.

A run of several tokens is a **prefill**; a one-token run at position 0 starts a sequence and is a
prefill too; a one-token run at a later position is a **decode** step. A static-shape export
(one token per call) feeds its prompt token by token: there each run's token is read back from the
embedding's output (the row of the program's embedding table it equals) and the first run whose
token is the previous run's argmax (greedy decoding) starts the decode phase; when that is not
possible (no ``.pte``, a quantized table, sampled tokens) only the first run of each sequence counts
as prefill (see docs/llm.md). Without intermediate outputs (no debug buffer) runs stay ``unknown``.

Time per operator class (attention, KV update, linear/8da4w, norm, embedding, other) is split by
phase; ``DELEGATE_CALL`` time goes to the class of the operators it ran (XNNPACK's partitions of
an LLM are its linears). Pure: works on an :class:`~etlens.analysis.inspector.Inspector` (model
objects), opens no file.

Example::

    from etlens.analysis.llm import llm_profile
    prof = llm_profile(inspector)
    if prof is not None:
        print(prof.phases["decode"].tokens_per_s, [r.label for r in prof.runs])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE, OPERATOR_CALL

__all__ = ["LlmRun", "PhaseStats", "LlmProfile", "looks_like_llm", "llm_profile", "op_class", "OP_CLASSES"]

#: operator classes, in display order
OP_CLASSES = ("attention", "kv_update", "linear", "norm", "embedding", "other")
_LLM_MARKERS = ("custom_sdpa", "update_cache", "sdpa_with_kv_cache", "scaled_dot_product")
_PHASES = ("prefill", "decode", "unknown")


def op_class(name: str, op_types: list[str], module: str = "") -> str:
    """The class of one runtime event: by its kernel / op types first, then by its module path."""
    text = " ".join([name.lower(), *(o.lower() for o in op_types)])
    if "update_cache" in text or "index_put" in text or "update_quantized_cache" in text:
        return "kv_update"
    if "sdpa" in text or "scaled_dot_product" in text or "softmax" in text:
        return "attention"
    if any(k in text for k in ("linear", "addmm", "fully connected", ".mm", "_mm", "bmm", "gemm", "8da4w",
                               "choose_qparams", "quantize_per_token", "dequantize_per_token", "int4", "int8mm")):
        return "linear"
    if "embedding" in text:
        return "embedding"
    if "rms_norm" in text or "layer_norm" in text:
        return "norm"
    mod = module.lower()
    path, _, cls = mod.partition(" ")
    leaf = path.rsplit(".", 1)[-1]
    if "norm" in leaf or "norm" in cls.rsplit(".", 1)[-1]:
        return "norm"
    if not mod and any(k in text for k in ("rsqrt", "_mean", ".mean")):
        return "norm"
    parts = path.split(".")
    if "attention" in parts or "attention" in leaf or any(k in path for k in ("rope", "rotary")) \
            or "attention" in cls.rsplit(".", 1)[-1]:
        return "attention"  # the attention module's own glue: RoPE, reshapes around SDPA
    return "other"


def looks_like_llm(inspector: Any, blocks: Optional[list[int]] = None) -> bool:
    """True when the dump (or its blocks ``blocks``) ran LLM ops (custom SDPA / KV-cache update, or SDPA)."""
    for bi, b in enumerate(inspector.block_columns):
        if blocks is not None and bi not in blocks:
            continue
        for i, name in enumerate(b.names):
            text = " ".join([name, *b.op_types[i]]).lower()
            if any(m in text for m in _LLM_MARKERS):
                return True
    return False


@dataclass
class LlmRun:
    """One run of the method: its phase, tokens, start position and time (ms)."""

    index: int              # order among the method's runs (dump order)
    block: int
    column: int             # run column j inside the block
    phase: str
    n_tokens: Optional[int]
    input_pos: Optional[int]
    time_ms: float
    #: generate session (0, 1 ...): a prefill and the decode steps after it
    session: int = 0
    #: where the phase comes from: ``read`` (logged shapes) or ``inferred`` (timings + program, no debug buffer)
    phase_source: str = "read"
    #: where ``n_tokens`` comes from: ``read``, ``given`` (--prompt-len) or ``inferred`` (an estimate)
    tokens_source: str = "read"
    #: the first token's position in the cache (read: ``input_pos``; else inferred from the session)
    position: Optional[int] = None
    #: why the run got its label (timing-only dumps)
    evidence: str = ""
    start_ms: Optional[float] = None

    @property
    def ms_per_token(self) -> float:
        return self.time_ms / self.n_tokens if self.n_tokens else math.nan

    @property
    def label(self) -> str:
        if self.phase == "prefill":
            approx = "~" if self.tokens_source == "inferred" and self.n_tokens else ""
            n = self.n_tokens if self.n_tokens else "?"
            return f"prefill ({approx}{n} token{'s' if self.n_tokens != 1 else ''})"
        return self.phase


@dataclass
class PhaseStats:
    """Aggregate of one phase: runs, tokens, total time, per-token latency and throughput."""

    phase: str
    runs: int = 0
    tokens: int = 0
    total_ms: float = 0.0

    @property
    def ms_per_run(self) -> float:
        return self.total_ms / self.runs if self.runs else math.nan

    @property
    def ms_per_token(self) -> float:
        return self.total_ms / self.tokens if self.tokens else math.nan

    @property
    def tokens_per_s(self) -> float:
        return 1000.0 * self.tokens / self.total_ms if self.total_ms > 0 and self.tokens else math.nan


@dataclass
class LlmProfile:
    """The LLM view of one method's runs (see the module docstring)."""

    method: str
    runs: list[LlmRun]
    phases: dict[str, PhaseStats]
    #: ``{class: {phase: total ms over that phase's runs}}``
    class_ms: dict[str, dict[str, float]]
    #: ``{n_tokens: PhaseStats}`` of the runs of each sequence length
    by_tokens: dict[int, PhaseStats]
    dynamic_shapes: Optional[bool]
    #: ``{reference node name: (class, {phase: ms per run})}`` through the events' debug handles
    node_ms: dict[str, tuple[str, dict[str, float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: per generate session: TTFT, tokens/s, decode latency percentiles, drift (``llm_phases.SessionStats``)
    sessions: list = field(default_factory=list)
    #: pooled over the sessions (``llm_phases.summary_of``)
    summary: dict = field(default_factory=dict)
    #: ``read`` (labels from logged shapes) or ``inferred`` (timing-only dump)
    labels: str = "read"
    prompt_lens: Optional[list[int]] = None

    def __repr__(self) -> str:
        """One line (a notebook shows the runs and classes charts, see :mod:`etlens.views.notebook`)."""
        ph = ", ".join(f"{p} {s.runs} run(s) {s.tokens} token(s)" for p, s in self.phases.items() if s.runs)
        return f"<etlens LlmProfile {self.method!r}: {len(self.runs)} runs ({ph or 'no phases'})>"

    def class_table(self) -> list[tuple[str, float, float, float, float]]:
        """Rows ``(class, prefill ms/token, decode ms/token, prefill share, decode share)``."""
        rows = []
        tot = {p: sum(c.get(p, 0.0) for c in self.class_ms.values()) for p in ("prefill", "decode")}
        for cls in OP_CLASSES:
            c = self.class_ms.get(cls)
            if not c:
                continue
            per = []
            for p in ("prefill", "decode"):
                t = self.phases[p].tokens
                per.append(c.get(p, 0.0) / t if t else math.nan)
            shares = [c.get(p, 0.0) / tot[p] if tot[p] else math.nan for p in ("prefill", "decode")]
            rows.append((cls, per[0], per[1], shares[0], shares[1]))
        return rows

    def to_json(self) -> dict:
        def f(x: float) -> Optional[float]:
            return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

        return {
            "method": self.method, "dynamic_shapes": self.dynamic_shapes,
            "runs": [{"index": r.index, "phase": r.phase, "label": r.label, "n_tokens": r.n_tokens,
                      "input_pos": r.input_pos, "time_ms": r.time_ms, "ms_per_token": f(r.ms_per_token),
                      "session": r.session, "phase_source": r.phase_source, "tokens_source": r.tokens_source,
                      "position": r.position, "evidence": r.evidence}
                     for r in self.runs],
            "labels": self.labels, "prompt_lens": self.prompt_lens,
            "sessions": [s.to_json() for s in self.sessions], "summary": dict(self.summary),
            "phases": {p: {"runs": s.runs, "tokens": s.tokens, "total_ms": s.total_ms, "ms_per_run": f(s.ms_per_run),
                           "ms_per_token": f(s.ms_per_token), "tokens_per_s": f(s.tokens_per_s)}
                       for p, s in self.phases.items()},
            "classes": [{"class": c, "prefill_ms_per_token": f(a), "decode_ms_per_token": f(b),
                         "prefill_share": f(x), "decode_share": f(y)} for c, a, b, x, y in self.class_table()],
            "by_tokens": {str(n): {"runs": s.runs, "ms_per_run": f(s.ms_per_run), "ms_per_token": f(s.ms_per_token)}
                          for n, s in sorted(self.by_tokens.items())},
            "notes": list(self.notes),
        }


def _module_of(b: Any, i: int) -> str:
    """The innermost module of event ``i`` as ``"path Class"`` (``""`` without an ETRecord).

    ``module_hierarchy`` is ``{node: {key: (path, class)}}`` (ExecuTorch's nn_module_stack per node).
    """
    mh = b.module_hierarchy[i] if b.module_hierarchy else {}
    if not isinstance(mh, dict) or not mh:
        return ""
    stack = next(iter(mh.values()))
    if isinstance(stack, dict) and stack:
        last = list(stack.values())[-1]
        if isinstance(last, (list, tuple)) and last:
            return " ".join(str(x) for x in last)
        return str(last)
    return str(stack)


def _scalar_int(values: list) -> Optional[int]:
    if len(values) != 1:
        return None
    t = values[0]
    shape = getattr(t, "shape", None)
    if shape is None or len(shape) != 0:
        return None
    if "int" not in str(getattr(t, "dtype", "")):
        return None
    return int(t.item())


def _shape_probes(inspector: Any, bi: int) -> tuple[Optional[int], Optional[int]]:
    """(event index giving the token count, event index giving the start position) in block ``bi``."""
    b = inspector.block_columns[bi]
    r0 = b.runs[0]
    tok = pos = None
    for i, name in enumerate(b.names):
        if b.debug_events[i] is None or name == OPERATOR_CALL or name in FRAMEWORK_EVENT_NAMES:
            continue
        text = " ".join([name, *b.op_types[i]]).lower()
        if tok is None and "embedding" in text:
            tok = i
        if pos is None and "select" in text:
            vals = inspector.run_debug_data(bi, i, 0)
            if _scalar_int(vals) is not None:
                pos = i
        if tok is not None and pos is not None:
            break
    if tok is None:  # no embedding event: the first [1, n, d] tensor
        for i, name in enumerate(b.names):
            if b.debug_events[i] is None or name == OPERATOR_CALL or name in FRAMEWORK_EVENT_NAMES:
                continue
            vals = inspector.run_debug_data(bi, i, 0)
            if vals and len(getattr(vals[0], "shape", ())) == 3 and vals[0].shape[0] == 1:
                tok = i
                break
    del r0
    return tok, pos


def _embedding_table(inspector: Any, block: Any, event: int) -> Optional[np.ndarray]:
    """The float embedding table the embedding kernel of ``event`` reads (its first argument, a
    constant of the ``.pte`` given to the inspector), or None."""
    pte = getattr(inspector, "pte", None)
    if pte is None:
        return None
    try:
        program = getattr(pte, "program", None)
        path = getattr(pte, "path", None) if program is not None else pte
        if program is None:
            from ..readers.pte import read

            program = read(pte).program
        plan = next(p for p in program.execution_plan if p.name == "forward")
        ins = plan.instructions()[int(block.instruction_ids[event])]
        w = plan.values[ins.args[0]].val
        if ins.kind != "KernelCall" or "embedding" not in plan.operators[ins.op_index].name or w.scalar_type != 6 \
                or not w.data_buffer_idx or not program.constant_segment_offsets or len(w.sizes) != 2 or not path:
            return None
        seg = program.segments[program.constant_segment_index]
        start = program.segment_base_offset + seg.offset + program.constant_segment_offsets[w.data_buffer_idx]
        count = int(w.sizes[0]) * int(w.sizes[1])
        with open(path, "rb") as f:  # only the table's bytes: an LLM's program can be gigabytes
            f.seek(start)
            data = f.read(4 * count)
        return np.frombuffer(data, "<f4", count=count).reshape(w.sizes)
    except (OSError, ValueError, IndexError, StopIteration, TypeError, AttributeError):
        return None
    except Exception:  # noqa: BLE001 - an unreadable program only costs the greedy rule
        return None


def _greedy_split(inspector: Any, runs: list[LlmRun], tok_of: dict[int, Optional[int]]) -> bool:
    """Static shapes: relabel each sequence's runs, prefill until the first run whose token is the
    previous run's argmax (greedy decoding), decode from there. False when tokens or logits are
    not readable or no run follows greedily (the position rule stays)."""
    tokens: list[Optional[int]] = []
    nexts: list[Optional[int]] = []
    tables: dict[int, Optional[np.ndarray]] = {}
    for r in runs:
        ev = tok_of.get(r.block)
        if ev is None:
            return False
        if r.block not in tables:
            tables[r.block] = _embedding_table(inspector, inspector.block_columns[r.block], ev)
        table = tables[r.block]
        vals = inspector.run_debug_data(r.block, ev, r.column)
        out = inspector.run_debug_data(r.block, None, r.column)
        if table is None or not vals or vals[0] is None or not out or out[0] is None:
            return False
        row = np.asarray(vals[0], dtype=np.float32).reshape(-1)[-table.shape[1]:]
        diff = np.abs(table - row).max(axis=1)
        tokens.append(int(diff.argmin()) if float(diff.min()) <= 1e-6 else None)
        logits = np.asarray(out[0])
        nexts.append(int(logits.reshape(-1, logits.shape[-1])[-1].argmax()) if logits.ndim else None)
    found = False
    start = 0
    for k in range(len(runs) + 1):
        if k == len(runs) or (k > start and runs[k].input_pos == 0):  # a sequence ends
            seq = range(start, k)
            first = next((j for j in seq if j > start and tokens[j] is not None and tokens[j] == nexts[j - 1]), None)
            if first is not None:
                found = True
                for j in seq:
                    runs[j].phase = "prefill" if j < first else "decode"
            start = k
    return found


def llm_profile(inspector: Any, method: Optional[str] = None,
                handle_to_nodes: Optional[dict[int, list[str]]] = None,
                prompt_lens: Optional[list[int]] = None) -> Optional[LlmProfile]:
    """The :class:`LlmProfile` of ``method`` (default: the method that did the work), or None when
    the dump does not look like an LLM's. ``handle_to_nodes`` (debug handle -> reference-graph node
    names) fills :attr:`LlmProfile.node_ms` for a graph overlay. Without intermediate outputs the
    runs are labelled from timings and the program (:mod:`etlens.analysis.llm_phases`, marked
    ``inferred``); ``prompt_lens`` (one prompt length, or one per session) makes token counts exact."""
    from .inspector.methods import main_method, method_timings

    if not looks_like_llm(inspector):
        return None
    timings = method_timings(inspector)
    main = next((m for m in timings if m.method == method), None) if method else main_method(timings)
    if main is None or not looks_like_llm(inspector, main.blocks):
        return None
    blocks = inspector.block_columns
    runs: list[LlmRun] = []
    notes: list[str] = []
    cls_ms: dict[str, dict[str, float]] = {}
    node_acc: dict[str, tuple[str, dict[str, float]]] = {}
    have_debug = bool(getattr(inspector, "has_debug_buffer", False))
    tok_of: dict[int, Optional[int]] = {}
    for bi in main.blocks:
        b = blocks[bi]
        k = b.raw.shape[1]
        exe = next((i for i, n in enumerate(b.names) if n == METHOD_EXECUTE and b.has_perf[i]), None)
        tok_i, pos_i = _shape_probes(inspector, bi) if have_debug else (None, None)
        tok_of[bi] = tok_i
        for j in range(k):
            n = pos = None
            if tok_i is not None:
                vals = inspector.run_debug_data(bi, tok_i, j)
                if vals and len(vals[0].shape) >= 2:
                    n = int(vals[0].shape[-2])
            if pos_i is not None:
                pos = _scalar_int(inspector.run_debug_data(bi, pos_i, j))
            if exe is not None:
                t = float(b.raw[exe, j])
            else:
                t = float(np.nansum([b.raw[i, j] for i in range(len(b)) if b.has_perf[i]
                                     and b.names[i] not in FRAMEWORK_EVENT_NAMES and not b.is_delegated[i]
                                     and b.names[i] != OPERATOR_CALL]))
            runs.append(LlmRun(index=int(b.runs[j]), block=bi, column=j, phase="unknown", n_tokens=n,
                               input_pos=pos, time_ms=t))
    runs.sort(key=lambda r: r.index)
    for r in runs:
        if r.n_tokens is None:
            continue
        r.phase = "prefill" if r.n_tokens > 1 or r.input_pos == 0 else "decode"
    for order, r in enumerate(runs):
        r.index = order
    counts = {r.n_tokens for r in runs if r.n_tokens is not None}
    dynamic = (len(counts) > 1) if counts else None
    if dynamic is False and counts == {1}:
        if _greedy_split(inspector, runs, tok_of):
            notes.append("every run took one token (a static-shape export): the prompt was fed token by token; a "
                         "run whose token is the previous run's most likely next token (greedy decoding) starts "
                         "the decode phase (tokens read back from the embedding's output)")
        else:
            notes.append("every run took one token (a static-shape export): the prompt was fed token by token, "
                         "which the dump cannot tell from generated tokens here; only the first run of each "
                         "sequence (position 0) counts as prefill")
    inferred = bool(runs) and all(r.phase == "unknown" and r.n_tokens is None for r in runs)
    if inferred:
        from .llm_phases.apply import label_from_timings

        phase_notes, _ = label_from_timings(inspector, runs, main.blocks, prompt_lens)
        notes.extend(phase_notes)
    phase_of = {(r.block, r.column): r.phase for r in runs}
    phases = {p: PhaseStats(p) for p in _PHASES}
    by_tokens: dict[int, PhaseStats] = {}
    for r in runs:
        s = phases[r.phase]
        s.runs += 1
        s.tokens += r.n_tokens or 0
        s.total_ms += r.time_ms
        if r.n_tokens is not None:
            g = by_tokens.setdefault(r.n_tokens, PhaseStats(f"{r.n_tokens} tokens"))
            g.runs += 1
            g.tokens += r.n_tokens
            g.total_ms += r.time_ms
    handle_nodes = handle_to_nodes.get if handle_to_nodes else None
    for bi in main.blocks:
        b = blocks[bi]
        for i, name in enumerate(b.names):
            if not b.has_perf[i] or not name or name in FRAMEWORK_EVENT_NAMES or name == OPERATOR_CALL \
                    or b.is_delegated[i]:
                continue
            ops = list(b.op_types[i])
            cls = op_class(name, ops, _module_of(b, i))
            if name == DELEGATE_CALL and not ops:
                cls = "linear"
            per = cls_ms.setdefault(cls, {})
            per_phase: dict[str, float] = {}
            for j in range(b.raw.shape[1]):
                p = phase_of.get((bi, j), "unknown")
                v = float(b.raw[i, j])
                if not math.isnan(v):
                    per[p] = per.get(p, 0.0) + v
                    per_phase[p] = per_phase.get(p, 0.0) + v
            if handle_nodes is not None:
                h = b.debug_handles[i]
                hs = () if h is None else ((h,) if isinstance(h, int) else tuple(h))
                for node in {nm for x in hs for nm in handle_nodes(x, ())}:
                    _, acc = node_acc.setdefault(node, (cls, {}))
                    for p, v in per_phase.items():
                        acc[p] = acc.get(p, 0.0) + v
    node_ms = {n: (c, {p: v / phases[p].runs for p, v in acc.items() if phases[p].runs})
               for n, (c, acc) in node_acc.items()}
    from .llm_phases.apply import sessions_of, summary_of

    if prompt_lens and not inferred:
        notes.append("labels and token counts read from logged shapes: the given prompt lengths are not needed "
                     "and were not used")
    sessions = sessions_of(runs)
    if inferred:
        from .llm_phases.program import llm_inputs

        dynamic = llm_inputs(record=getattr(inspector, "record", None), pte=getattr(inspector, "pte", None)).dynamic
    return LlmProfile(method=main.method, runs=runs, phases=phases, class_ms=cls_ms, by_tokens=by_tokens,
                      dynamic_shapes=dynamic, node_ms=node_ms, notes=notes, sessions=sessions,
                      summary=summary_of(sessions, runs), labels="inferred" if inferred else "read",
                      prompt_lens=list(prompt_lens) if prompt_lens else None)
