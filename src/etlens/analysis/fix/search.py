"""The keep-in-float search behind ``etlens fix``: rank, simulate, verify by re-lowering, choose.

1. **Rank.** Each quantized cluster's introduced error (its own error alone, measured at the model
   output; :func:`~etlens.analysis.numerics.introduced.introduced_errors`) orders the modules.
2. **Simulate.** Candidates keep the top-1, top-2 … ranked modules in float, each alone and with
   its *consumers* (the modules that would quantize the kept output again at their input:
   :func:`~etlens.analysis.fix.consumers.find_consumers`; an activation culprit needs them), and one
   op-type set (:func:`type_candidate`: every module of the type whose modules introduce the most
   error together). The budget (``max_float``, default two modules or 5% of the quantized modules,
   whichever is more) counts every listed module with weights, consumers included (an activation module
   kept so the float tensor passes through it costs nothing); a set over it is reported
   in the notes, never chosen. Each set is pt2e-quantized with the recipe's own quantizer
   (:func:`~etlens.builder.recipe.recipe_quantizer`: the toolchain's module filter, as a user
   applies the file) and run in PyTorch (the fake-quantized QDQ graph): seconds, no lowering.
3. **Choose.** With ``target_snr``: the smallest set whose simulated output SNR reaches it (else the
   best one). Without: the smallest set that removes at least 95% of the error the best set within
   the budget removes (more modules in float cost latency and bytes for nothing).
4. **Write, then verify.** The recipe file (``out_dir/recipe.json``: every kept module with what
   stays float and why, and the toolchain's calls to apply it) is written first; the fully quantized
   model and the set the file lists (plus the smaller sets, while the lowering budget lasts: at
   most ``max_lowerings``, 5 by default) are re-lowered with the same quantizer and run in the
   session's warm worker child: output SNR / MSE vs the float model, latency from the ETDump,
   ``.pte`` bytes, planned arena bytes. What it reports is what a user applying the file gets.

Example::

    from etlens.builder.session import BuildSession
    from etlens.analysis.fix import fix_model

    with BuildSession.load("model.py:build", backend="xnnpack", quantize=True) as s:
        res = fix_model(s, "out/", target_snr=30.0)
        res.recipe.save("recipe.json"); res.culprits[0].module_path
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ...errors import EtlensError
from .consumers import annotated_module, budget_cost, describe_modules, find_consumers

__all__ = ["Candidate", "FixResult", "fix_model", "default_budget", "output_error", "type_candidate"]


@dataclass
class Candidate:
    """One keep-in-float set: simulated and (when lowered) measured on the runtime."""

    #: every module the set keeps in float (culprits and consumers): the budget counts every one with
    #: weights (:func:`~etlens.analysis.fix.consumers.budget_cost`)
    keep_float: list[str]
    #: the module type when the set is "every quantized module of this type" (else ``None``)
    op_type: str | None = None
    #: ``{consumer: kept module whose output it takes}``: the listed modules kept because their input stays float
    consumers: dict[str, str] = field(default_factory=dict)
    simulated_snr_db: float | None = None
    simulated_mse: float | None = None
    lowered: bool = False
    snr_db: float | None = None
    mse: float | None = None
    latency_ms: float | None = None
    pte_bytes: int | None = None
    arena_bytes: int | None = None
    pareto: bool = False
    chosen: bool = False
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = None  # JSON has no infinity: an exact result reads null
        return out


@dataclass
class FixResult:
    """What ``etlens fix`` found: culprits, candidates (simulated + lowered), the chosen recipe."""

    culprits: list[Any]
    candidates: list[Candidate]
    simulated: list[Candidate]
    recipe: Any
    budget: int
    quantized_modules: int
    target_snr_db: float | None
    lowerings: int
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    backend: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "target_snr_db": self.target_snr_db,
            "budget": self.budget,
            "quantized_modules": self.quantized_modules,
            "lowerings": self.lowerings,
            "recipe": self.recipe.to_json(),
            "culprits": [c.to_json() for c in self.culprits],
            "candidates": [c.to_json() for c in self.candidates],
            "simulated": [c.to_json() for c in self.simulated],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "notes": self.notes,
        }


def default_budget(quantized_modules: int) -> int:
    """Two modules or 5% of the quantized modules, whichever is more."""
    return max(2, int(0.05 * quantized_modules))


def output_error(approx: Any, ref: Any) -> tuple[float, float]:
    """``(snr_db, mse)`` of ``approx`` against ``ref`` over every float output tensor."""
    from ..numerics.introduced import float_tensors, nsr

    ratio = nsr(approx, ref)
    a, r = float_tensors(approx), float_tensors(ref)
    n = sum(t.numel() for t in r) or 1
    mse = sum(float(((x.detach().double() - y.detach().double()) ** 2).sum())
              for x, y in zip(a, r) if x.shape == y.shape) / n
    snr = math.inf if ratio == 0 else (-math.inf if math.isinf(ratio) else -10.0 * math.log10(ratio))
    return snr, mse


def _etdump_latency_ms(path: str) -> float | None:
    """Mean ``Method::execute`` time (ms) over the runs of an ETDump (host ticks are ns)."""
    from ...readers.etdump import read_etdump
    from ...schema.facts import METHOD_EXECUTE

    dump = read_etdump(path)
    times = []
    for run in dump.runs:
        for i in range(len(run.kind)):
            sid = int(run.name_id[i])
            if sid >= 0 and dump.string(sid) == METHOD_EXECUTE:
                times.append((int(run.end_time[i]) - int(run.start_time[i])) / 1e6)
    return sum(times) / len(times) if times else None


def _arena_bytes(pte: str) -> int | None:
    from ...readers.pte import read as read_pte
    from ..memory import analyze_memory

    try:
        report = analyze_memory(read_pte(pte))
    except Exception:  # noqa: BLE001 - the arena size is an extra column
        return None
    return sum(a.size for m in report.methods for a in m.arenas)


def fix_model(session: Any, out_dir: str, *, target_snr: float | None = None, max_float: int | None = None,
              max_lowerings: int = 5, runs: int = 3, on_progress: Callable[[str], Any] | None = None,
              verify: bool = True) -> FixResult:
    """Find the smallest keep-in-float recipe for ``session``'s model (see the module docstring).

    Args:
        session: a :class:`~etlens.builder.session.BuildSession` made with ``quantize=True``.
        out_dir: where each lowered candidate's ``.pte`` / ``.etdp`` go (one folder per candidate).
        target_snr: the output SNR (dB vs float) to reach; ``None``: remove what the budget can.
        max_float: the most modules kept in float (default :func:`default_budget`).
        max_lowerings: the most lowerings (the fully quantized build included).
        runs: runtime runs per lowered candidate (latency is their mean).
        verify: lower and run (``False``: rank, simulate and write the recipe only; no candidate is lowered).

    Raises:
        EtlensError: the model has no quantized op (nothing to keep in float), or the backend's
            quantizer cannot leave a module in float.
    """
    import torch

    from ...builder.recipe import Recipe
    from ..numerics.introduced import introduced_errors

    say = on_progress or (lambda _m: None)
    if not session.quantize:
        raise EtlensError("etlens fix needs a quantized build: give --quantize (it keeps modules of the int8 "
                          "model in float)")
    if verify and max_lowerings < 2:
        raise EtlensError("--max-lowerings must be at least 2 (the int8 build and one candidate)")
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    say("rank: introduced error per quantized op")
    float_gm = session.float_module()
    quant_gm = session.quantized_module
    inputs = session.inputs
    rows = introduced_errors(float_gm, quant_gm, inputs)
    seconds["rank"] = time.perf_counter() - t0
    backend = getattr(session.config, "name", str(session.backend))
    ranked: list[str] = []
    for r in rows:
        if r.module_path and r.module_path not in ranked:
            ranked.append(r.module_path)
    if not ranked:
        raise EtlensError(f"this model cannot be partly quantized on {backend}: the quantizer put no op of a named "
                          "module in int8 (nothing to keep in float)" if not rows else
                          f"this model cannot be partly quantized on {backend}: its quantized ops belong to no "
                          "nn.Module (the forward's own ops); wrap them in modules to keep them in float")
    n_modules = len(ranked)
    budget = max_float if max_float is not None else default_budget(n_modules)
    budget = max(1, min(budget, n_modules))
    with torch.no_grad():
        ref = float_gm(*inputs)
        base_snr, base_mse = output_error(quant_gm(*inputs), ref)

    # -- simulate: top-k culprits in float, with and without their consumers, in PyTorch (the QDQ graph) --
    t1 = time.perf_counter()
    notes: list[str] = []
    over: list[Candidate] = []  # sets over the budget: shown in the notes, never chosen
    sim = _Simulator(session, inputs, ref, backend)
    simulated = [Candidate(keep_float=[], simulated_snr_db=base_snr, simulated_mse=base_mse)]
    for k in range(1, min(budget, 8) + 1):
        keep = ranked[:k]
        for cand in sim.variants(keep, say, budget=budget):
            (simulated if budget_cost(session.model, cand.keep_float) <= budget else over).append(cand)
        if target_snr is not None and any((c.simulated_snr_db or -math.inf) >= target_snr for c in simulated[1:]):
            break
    typed = type_candidate(rows, ranked)
    if typed is not None and not any(set(c.keep_float) == set(typed.keep_float) for c in simulated):
        try:
            for cand in sim.variants(typed.keep_float, say, op_type=typed.op_type):
                (simulated if budget_cost(session.model, cand.keep_float) <= budget else over).append(cand)
        except EtlensError:
            pass  # an extra candidate: the per-module ones stand
    seconds["simulate"] = time.perf_counter() - t1
    chosen = _choose(simulated, target_snr)
    if target_snr is not None and (chosen.simulated_snr_db or -math.inf) < target_snr:
        notes.append(f"no set of at most {budget} module(s) reaches {target_snr:g} dB (simulated); the best one is "
                     f"chosen ({_fmt_db(chosen.simulated_snr_db)}); raise --max-float to try more")
    best_over = max(over, key=lambda c: c.simulated_snr_db or -math.inf, default=None)
    if best_over is not None and (best_over.simulated_snr_db or -math.inf) > (chosen.simulated_snr_db or -math.inf):
        what = f"every {best_over.op_type} " if best_over.op_type else ""
        notes.append(f"keeping {what}{', '.join(best_over.keep_float)} in float ({len(best_over.keep_float)} modules, "
                     f"over the budget of {budget}) simulates at {_fmt_db(best_over.simulated_snr_db)}")

    # -- the recipe file, written before anything is lowered: verification lowers what it says ------
    recipe = Recipe(keep_float=list(chosen.keep_float), backend=backend,
                    notes={"simulated_snr_db": chosen.simulated_snr_db, "int8_snr_db": base_snr,
                           "target_snr_db": target_snr, "budget": budget})
    if chosen.keep_float:
        graph = sim.graphs[tuple(chosen.keep_float)]
        recipe.modules = describe_modules(chosen.keep_float, chosen.consumers, rows, graph, session.model, backend)
    recipe_path = os.path.join(out_dir, "recipe.json")
    recipe.save(recipe_path)

    # -- verify: lower + run the int8 build, the recipe file, then smaller sets while the budget lasts --
    t2 = time.perf_counter()
    order = [simulated[0], chosen]
    order += [c for c in simulated[1:] if c is not chosen and len(c.keep_float) < len(chosen.keep_float)]
    order = order[:max_lowerings] if verify else []
    lowered: list[Candidate] = []
    lowerings = 0
    for cand in order:
        if cand.lowered:
            continue
        what = ", ".join(cand.keep_float) + " in float" if cand.keep_float else "int8, nothing in float"
        say(f"lower + run: {what}")
        keep = Recipe.load(recipe_path).keep_float if cand is chosen else cand.keep_float
        lowerings += _measure(session, cand, keep, out_dir, ref, runs, len(lowered))
        lowered.append(cand)
    seconds["verify"] = time.perf_counter() - t2
    chosen.chosen = True
    _pareto(lowered)
    lowered.sort(key=lambda c: len(c.keep_float))
    recipe.notes = {"snr_db": chosen.snr_db, **recipe.notes}
    recipe.save(recipe_path)
    seconds["total"] = time.perf_counter() - t0
    return FixResult(culprits=rows, candidates=lowered, simulated=simulated + over, recipe=recipe, budget=budget,
                     quantized_modules=n_modules, target_snr_db=target_snr, lowerings=lowerings, seconds=seconds,
                     notes=notes, backend=backend)


class _Simulator:
    """Simulates keep-float sets in PyTorch with the recipe's own quantizer; remembers each converted graph."""

    def __init__(self, session: Any, inputs: tuple, ref: Any, backend: str) -> None:
        self.session, self.inputs, self.ref, self.backend = session, inputs, ref, backend
        self.graphs: dict[tuple[str, ...], Any] = {}
        self.done: set[tuple[str, ...]] = set()

    def run(self, keep: list[str], say: Callable[[str], Any], **kw: Any) -> Candidate | None:
        import torch

        from ...builder.quantize import quantize_pt2e
        from ...builder.recipe import recipe_quantizer

        key = tuple(keep)
        if key in self.done:
            return None
        self.done.add(key)
        s = self.session
        say(f"simulate: keep {', '.join(keep)} in float")
        try:
            q = quantize_pt2e(s.model, self.inputs, s.config, calibration=s.calibration, exported=s.exported,
                              quantizer=recipe_quantizer(s.config, keep, exported=s.exported))
        except Exception as exc:  # noqa: BLE001 - the backend's quantizer refused a partial annotation
            why = str(exc).splitlines()[0] if str(exc) else ""
            raise EtlensError(f"this model cannot be partly quantized on {self.backend}: keeping {keep[-1]!r} in "
                              f"float failed in the quantizer ({type(exc).__name__}: {why})") from exc
        with torch.no_grad():
            snr, mse = output_error(q(*self.inputs), self.ref)
        self.graphs[key] = q
        return Candidate(keep_float=list(keep), simulated_snr_db=snr, simulated_mse=mse, **kw)

    def variants(self, keep: list[str], say: Callable[[str], Any], op_type: str | None = None,
                 budget: int | None = None) -> list[Candidate]:
        """``keep`` alone, and ``keep`` with the consumers that would re-quantize its output (not
        simulated when that is over ``budget``)."""
        from ...builder.recipe import recipe_quantizer

        s = self.session
        out = [c for c in [self.run(keep, say, op_type=op_type)] if c is not None]
        try:
            gm = annotated_module(s.exported, recipe_quantizer(s.config, keep, exported=s.exported))
            consumers = find_consumers(gm, keep, s.model)
        except Exception:  # noqa: BLE001 - without consumers the plain set stands
            consumers = {}
        if consumers and (budget is None or budget_cost(s.model, [*keep, *consumers]) <= budget):
            cand = self.run(list(keep) + list(consumers), say, op_type=op_type, consumers=consumers)
            if cand is not None:
                out.append(cand)
        return out


def type_candidate(rows: list[Any], ranked: list[str]) -> Candidate | None:
    """The op-type candidate: every quantized module of the type whose modules introduce the most
    error together (``keep every GELU``), when that type is a minority of at least two modules (a
    type covering most of the model is "keep the model in float", not a recipe)."""
    types: dict[str, list[str]] = {}
    error: dict[str, float] = {}
    for r in rows:
        if not r.module_path or not r.module_type or not math.isfinite(r.introduced):
            continue
        paths = types.setdefault(r.module_type, [])
        if r.module_path not in paths:
            paths.append(r.module_path)
        error[r.module_type] = error.get(r.module_type, 0.0) + r.introduced
    fit = [t for t, paths in types.items() if 2 <= len(paths) <= len(ranked) // 2]
    if not fit:
        return None
    best = max(fit, key=lambda t: error[t])
    return Candidate(keep_float=[p for p in ranked if p in types[best]], op_type=best)


def _fmt_db(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} dB"


def _choose(sims: list[Candidate], target: float | None) -> Candidate:
    """With ``target``: the smallest set reaching it (else the best); without: the smallest set removing
    95% of what the best set removes. Smallest counts every listed module (consumers too)."""
    sims = [sims[0]] + sorted(sims[1:], key=lambda c: len(c.keep_float))
    if target is not None:
        for c in sims:
            if (c.simulated_snr_db or -math.inf) >= target:
                return c
        return max(sims, key=lambda c: c.simulated_snr_db or -math.inf)
    base = sims[0].simulated_mse or 0.0
    best = min(c.simulated_mse or 0.0 for c in sims)
    gain = base - best
    if gain <= 0:
        return sims[0]
    for c in sims:
        if base - (c.simulated_mse or 0.0) >= 0.95 * gain:
            return c
    return sims[-1]


def _measure(session: Any, cand: Candidate, keep: list[str], out_dir: str, ref: Any, runs: int, index: int) -> int:
    """Lower and run ``keep`` (``cand``'s set, or what the recipe file says) in the session's child with
    the recipe's own quantizer; fill ``cand``'s measured columns. Returns lowerings made."""
    from ...builder.recipe import recipe_quantizer

    sub = os.path.join(out_dir, f"candidate{index}" if keep else "int8")
    os.makedirs(sub, exist_ok=True)
    v = session if not keep else session.variant(
        quantizer=recipe_quantizer(session.config, keep, exported=session.exported), name=session.name)
    try:
        arts = v.lower(sub)
        etdp = os.path.join(sub, session.name + ".etdp")
        outs = v.run(arts.pte, runs=runs, etdump=etdp)
    except EtlensError as exc:
        cand.error = str(exc).splitlines()[0][:300]
        return 1
    finally:
        if v is not session:
            v.close()
    cand.lowered = True
    out = outs[0] if isinstance(outs, (list, tuple)) and len(outs) == 1 else outs
    cand.snr_db, cand.mse = output_error(out, ref)
    cand.pte_bytes = os.path.getsize(arts.pte)
    cand.latency_ms = _etdump_latency_ms(etdp) if os.path.exists(etdp) else None
    cand.arena_bytes = _arena_bytes(arts.pte)
    return 1


def _pareto(cands: list[Candidate]) -> None:
    """Mark the candidates no other beats on both output SNR and latency (then bytes)."""
    ok = [c for c in cands if c.lowered and c.snr_db is not None]
    for c in ok:
        c.pareto = not any(
            o is not c and (o.snr_db or -math.inf) >= (c.snr_db or -math.inf)
            and (o.latency_ms or 0) <= (c.latency_ms or 0)
            and ((o.snr_db or -math.inf) > (c.snr_db or -math.inf) or (o.latency_ms or 0) < (c.latency_ms or 0))
            for o in ok)
