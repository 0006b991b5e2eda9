"""What the program says about an LLM's runs: the tokens input (static or dynamic length), ``input_pos``, the KV cache.

A timing-only ETDump does not log shapes, but the program that ran does declare them. An
``export_llama`` method is ``forward(tokens[1, n], input_pos[1])`` over KV-cache buffers:

- **dynamic shapes** (the default export): ``n`` is a symbol (``s27``) with a range
  (``1..max_seq_len-1``): a prefill feeds the whole prompt in one call, a decode step one token;
- **static shapes** (``--disable_dynamic_shape``): ``n`` is a number (1): every call takes exactly
  that many tokens, so a prompt is fed token by token and every run has the same token count;
- ``input_pos`` (a one-element int64 input) says the cache is indexed by position: each decode
  step adds one token, and a session restarts at position 0.

Read from the ETRecord's edge program (its JSON: input specs, tensor sizes, range constraints),
or from the ``.pte`` (the method's input tensors: sizes and ``shape_dynamism``), whichever is
given; ExecuTorch's own ETRecord objects work too (their ``ExportedProgram``).

Example::

    from etlens.analysis.llm_phases import llm_inputs
    facts = llm_inputs(record=inspector.record, pte="model.pte")
    facts.dynamic, facts.tokens_per_call, facts.max_tokens, facts.source
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["LlmInputs", "llm_inputs"]

_EDGE = "edge_dialect_exported_program/"
_INT64 = 4  # ExecuTorch ScalarType Long


@dataclass
class LlmInputs:
    """The forward method's token inputs as the program declares them (``None``: not known).

    ``dynamic``: the tokens input has a symbolic length; ``tokens_per_call``: the fixed length of a
    static one; ``max_tokens``: the largest call a dynamic one accepts; ``has_input_pos``: an
    ``input_pos`` input (a KV-cache program); ``source``: ``"etrecord"``, ``"pte"`` or ``None``.
    """

    dynamic: Optional[bool] = None
    tokens_per_call: Optional[int] = None
    max_tokens: Optional[int] = None
    has_input_pos: bool = False
    tokens_input: Optional[str] = None
    source: Optional[str] = None

    def describe(self) -> str:
        """One sentence for notes and reports."""
        if self.dynamic is None:
            return "the program's token input shape is not known (no ETRecord or .pte)"
        where = "ETRecord" if self.source == "etrecord" else ".pte"
        if self.dynamic:
            top = f" (1..{self.max_tokens})" if self.max_tokens else ""
            return f"the {where} declares a dynamic tokens length{top}: a prefill is one call of the whole prompt"
        return (f"the {where} declares a static tokens length of {self.tokens_per_call}: every call takes "
                f"{self.tokens_per_call} token(s), a prompt is fed token by token")


def llm_inputs(record: Any = None, pte: Any = None, method: str = "forward") -> LlmInputs:
    """The :class:`LlmInputs` of ``method`` from an ETRecord (``Record``, etlens or ExecuTorch one) or a
    ``.pte`` (path or read artifact); an empty one when neither tells. Never raises for what it cannot read."""
    out = None
    if record is not None:
        raw = getattr(record, "raw", record)
        hit = _CACHE.get((id(raw), method))
        if hit is not None and hit[0] is raw:
            out = hit[1]
        else:
            try:
                out = _from_record(record, method)
            except Exception:  # noqa: BLE001 - an unreadable record only costs this hint
                out = None
            if len(_CACHE) > 8:
                _CACHE.clear()
            _CACHE[(id(raw), method)] = (raw, out)  # the record is held: its id is not reused while cached
    if (out is None or out.dynamic is None) and pte is not None:
        try:
            out = _from_pte(pte, method) or out
        except Exception:  # noqa: BLE001
            pass
    return out or LlmInputs()


#: ``{(id(record), method): (record, facts)}``: a fleet worker labels many dumps of one program
_CACHE: dict[tuple[int, str], tuple[Any, Optional[LlmInputs]]] = {}


def _from_record(record: Any, method: str) -> Optional[LlmInputs]:
    from ..record import as_record

    rec = as_record(record)
    if rec.etlens is not None:
        stage = _EDGE + method
        if stage not in rec.stages():
            stage = next((s for s in rec.stages() if s.startswith(_EDGE)), None)
        if stage is None:
            return None
        return _from_json(rec.etlens.program_json(stage))
    ep = rec.edge_program(method)
    return _from_exported(ep) if ep is not None else None


def _user_inputs_json(doc: dict) -> list[tuple[str, list[dict], str]]:
    """``[(name, sizes, dtype)]`` of the user inputs of a serialized ExportedProgram."""
    gm = doc["graph_module"]
    graph = gm["graph"]
    tensors = graph.get("tensor_values", {})
    out = []
    for spec in (gm.get("signature") or {}).get("input_specs") or []:
        (kind, val), = spec.items()
        if kind != "user_input":
            continue
        arg = (val or {}).get("arg") or {}
        name = (arg.get("as_tensor") or {}).get("name")
        if name is None or name not in tensors:
            continue
        tv = tensors[name]
        out.append((name, tv.get("sizes", []), str(tv.get("dtype"))))
    return out


def _from_json(doc: dict) -> Optional[LlmInputs]:
    ranges = doc.get("range_constraints") or {}
    inputs = _user_inputs_json(doc)
    ints = [(n, s) for n, s, d in inputs if d in ("4", "ScalarType.LONG", "LONG", "5", "ScalarType.INT", "INT")]
    cand = ints or [(n, s) for n, s, _ in inputs]
    tokens = next(((n, s) for n, s in cand if len(s) == 2), None)
    if tokens is None:
        return None
    name, sizes = tokens
    seq = sizes[1]
    out = LlmInputs(tokens_input=name, source="etrecord",
                    has_input_pos=any(len(s) == 1 for n, s in cand if n != name))
    if "as_int" in seq:
        out.dynamic, out.tokens_per_call = False, int(seq["as_int"])
        return out
    expr = (seq.get("as_expr") or {}).get("expr_str", "")
    out.dynamic = True
    rng = ranges.get(expr) or {}
    top = rng.get("max_val")
    if isinstance(top, (int, float)) and top < 1 << 40:
        out.max_tokens = int(top)
    return out


def _from_exported(ep: Any) -> Optional[LlmInputs]:
    """ExecuTorch's ETRecord: the edge ``ExportedProgram``'s placeholders (torch SymInts for dynamic dims)."""
    names = set(ep.graph_signature.user_inputs)
    cand = []
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in names:
            val = node.meta.get("val")
            shape = tuple(getattr(val, "shape", ()))
            cand.append((node.name, shape))
    tokens = next(((n, s) for n, s in cand if len(s) == 2), None)
    if tokens is None:
        return None
    name, shape = tokens
    seq = shape[1]
    out = LlmInputs(tokens_input=name, source="etrecord", has_input_pos=any(len(s) == 1 for n, s in cand if n != name))
    if isinstance(seq, int):
        out.dynamic, out.tokens_per_call = False, int(seq)
        return out
    out.dynamic = True
    try:
        rng = ep.range_constraints.get(seq.node.expr)
        top = int(rng.upper) if rng is not None else None
        out.max_tokens = top if top is not None and top < 1 << 40 else None
    except Exception:  # noqa: BLE001 - unbounded or unusual ranges: no upper bound
        pass
    return out


def _from_pte(pte: Any, method: str) -> Optional[LlmInputs]:
    """The ``.pte``: the method's first 2-d int64 input is the tokens; ``shape_dynamism`` > 0 means its sizes
    are upper bounds (a dynamic length)."""
    program = getattr(pte, "program", None)
    if program is None:
        from ...readers.pte import read

        program = read(pte).program
    plan = next((p for p in program.execution_plan if p.name == method), None)
    if plan is None:
        return None
    tensors = [(i, plan.values[i].val) for i in plan.inputs]
    tensors = [(i, t) for i, t in tensors if hasattr(t, "sizes")]
    ints = [(i, t) for i, t in tensors if t.scalar_type == _INT64]
    tokens = next(((i, t) for i, t in ints if len(t.sizes) == 2), None)
    if tokens is None:
        return None
    i, t = tokens
    out = LlmInputs(tokens_input=f"input {plan.inputs.index(i)}", source="pte",
                    has_input_pos=any(len(x.sizes) == 1 for j, x in ints if j != i))
    if t.shape_dynamism:
        out.dynamic, out.max_tokens = True, int(t.sizes[1])
    else:
        out.dynamic, out.tokens_per_call = False, int(t.sizes[1])
    return out
