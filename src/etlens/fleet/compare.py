"""``etlens compare A B``: per op and per module, is B slower than A — with a verdict, not a guess.

A side is a set of runs: ETDumps (parsed in memory, attributed with that side's ETRecord) or a
filter over a dataset (``build = 'n'``). For each side every operator event gives one sample per
run (framework events and the ``OPERATOR_CALL`` wrapper are left out; the whole-model latency,
``Method::execute``, is the summary).

Matching an op of A to an op of B, in order:

1. same block, event name, debug handles, module path and occurrence (the n-th such event of a
   run, when a key repeats — the match then says so);
2. what is left: same block, event name and module path (the debug handle changed between builds;
   the match explains it);
3. still unmatched: a row with verdict ``only_a`` / ``only_b``.

Per module: the sum per run of the module's operator events. Verdicts: :mod:`etlens.fleet.stats`.

The unit of replication is the process: each ETDump file is one process (``unit="file"``, the default;
``unit="device"`` makes each device one replicate, for claims about a device population). Runs inside a
process are repeated measures: each process contributes the median of its runs. With one process a
side the verdict falls back to the runs, with an effect floor from the spread of all ops' ratios.

Example::

    from etlens.fleet.compare import Side, compare
    res = compare(Side.of_dataset("fleet/", "build = 'n'"), Side.of_dataset("fleet/", "build = 'n+1'"))
    [r["event_name"] for r in res["rows"] if r["verdict"] == "regression"]
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import EtlensError
from ..schema import METHOD_EXECUTE
from .sql import OP_FILTER, duckdb_connection
from .stats import (DEFAULTS, IMPROVEMENT, MIN_SPEED_OPS, REGRESSION, cross_op_floor, fdr_bh, pooled_variance,
                    replicated_verdict, side_shift, state_loading, state_scores, t_pvalue,
                    unit_medians, unit_table, variance_prior, verdict)

__all__ = ["Side", "compare", "load_side", "CompareResult"]


class CompareResult(dict):
    """What :func:`compare` returns: a plain dict (``rows``, ``modules``, ``summary``, ``samples``) whose
    ``repr`` is one line (a notebook shows the compare page, see :mod:`etlens.views.notebook`)."""

    def __repr__(self) -> str:
        s = self.get("summary", {})
        m = s.get("model_latency") or {}
        return (f"<etlens CompareResult {s.get('a')!r} vs {s.get('b')!r}: {s.get('regressions')} regression(s), "
                f"{s.get('improvements')} improvement(s) over {s.get('ops')} ops; whole model {m.get('verdict')}>")

_KEY = ["block", "event_name", "debug_handles", "module_path", "occurrence"]


@dataclass
class Side:
    """One side of a comparison: ``etdumps`` (+ ``etrecord``/``pte``) or a ``dataset`` with a ``where`` filter."""

    label: str
    etdumps: list[str] = field(default_factory=list)
    etrecord: str | None = None
    dataset: str | None = None
    where: str | None = None

    @classmethod
    def of_dataset(cls, dataset: str, where: str | None = None) -> "Side":
        """The runs of ``dataset`` that pass the SQL filter ``where`` (all of them when None)."""
        return cls(label=f"{dataset} [{where}]" if where else dataset, dataset=dataset, where=where)

    @classmethod
    def of_etdumps(cls, etdumps: list[str], etrecord: str | None = None) -> "Side":
        """The runs of these ETDump files, attributed with ``etrecord`` when given."""
        return cls(label=", ".join(os.path.basename(p) for p in etdumps), etdumps=list(etdumps), etrecord=etrecord)


def _connection(side: Side):
    if side.dataset is not None:
        return duckdb_connection(side.dataset)
    import pyarrow as pa

    from .ingest import dump_rows, record_at

    record = record_at(side.etrecord)
    tables = [dump_rows(p, record) for p in side.etdumps]
    return duckdb_connection(table=pa.concat_tables(tables) if tables else None)


def load_side(side: Side):
    """``(op samples, latency samples)`` DataFrames of one side (one row per event per run)."""
    con = _connection(side)
    where = f"({side.where})" if side.where else "TRUE"
    try:
        ops = con.execute(
            f"SELECT block, event_name, debug_handles, module_path, node, occurrence, file, run, device, build, "
            f"duration_ms FROM events WHERE {where} AND {OP_FILTER}").df()
        lat = con.execute(
            f"SELECT file, run, device, build, duration_ms FROM events WHERE {where} AND "
            f"event_name = '{METHOD_EXECUTE}' AND duration_ms IS NOT NULL").df()
    except Exception as exc:  # a bad --where is the user's one-line error
        raise EtlensError(f"compare: cannot select side {side.label!r}: {' '.join(str(exc).split())[:400]}") from exc
    if ops.empty and lat.empty:
        raise EtlensError(f"compare: side {side.label!r} has no timed events (check the --where filter, "
                          "e.g. \"build = 'n'\")")
    for c in ("debug_handles", "module_path", "node", "device", "build"):
        ops[c] = ops[c].astype(object).where(ops[c].notna(), None)
    return ops, lat


def _units(df, unit: str) -> np.ndarray:
    u = df[unit].astype(object)
    return u.where(u.notna(), "?").astype(str).to_numpy()


def _groups(df, unit: str = "file") -> dict[tuple, dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    if df.empty:
        return out
    for key, g in df.groupby(_KEY, dropna=False, sort=False):
        key = tuple(None if (isinstance(k, float) and np.isnan(k)) else k for k in key)
        out[key] = {"samples": g["duration_ms"].to_numpy(), "units": _units(g, unit), "node": g["node"].iloc[0]}
    return out


def _match(ga: dict, gb: dict) -> list[tuple[tuple | None, tuple | None, str]]:
    """Pairs ``(key A, key B, how)``; keys None for one-sided rows."""
    pairs: list[tuple[tuple | None, tuple | None, str]] = []
    repeats: dict[tuple, int] = {}
    for k in list(ga) + list(gb):
        repeats[k[:4]] = max(repeats.get(k[:4], 0), k[4] + 1)
    left_a = [k for k in ga if k not in gb]
    left_b = [k for k in gb if k not in ga]
    for k in ga:
        if k in gb:
            n = repeats[k[:4]]
            how = "debug handle, module path and name" + (
                f"; ambiguous: {n} events share them in a run, matched by order (#{k[4] + 1} of {n})" if n > 1 else "")
            pairs.append((k, k, how))
    by_loose: dict[tuple, list[tuple]] = {}
    for k in left_b:
        by_loose.setdefault((k[0], k[1], k[3]), []).append(k)
    for k in left_a:
        cands = by_loose.get((k[0], k[1], k[3]))
        if cands:
            kb = cands.pop(0)
            how = (f"module path and name; debug handle differs (A {k[2]}, B {kb[2]})"
                   + (f"; {len(cands) + 1} candidates, matched by order" if len(cands) else ""))
            pairs.append((k, kb, how))
            left_b.remove(kb)
        else:
            pairs.append((k, None, "only in A"))
    pairs += [(None, k, "only in B") for k in left_b]
    return pairs


class _Stats:
    """The comparison-wide facts a verdict needs. Processes as the unit: each process's state score (the
    process-state model of :func:`~etlens.fleet.stats.state_scores`), the shift the sides share by chance,
    the variance prior and the drift floor; one process a side: the cross-op floor."""

    def __init__(self, pairs: list, th: dict[str, Any]) -> None:
        self.th = th
        tabs = [(unit_table(*a), unit_table(*b)) for a, b in pairs]
        self.raw_prior = variance_prior([(ta[1], tb[1]) for ta, tb in tabs])
        self.replicated = bool(np.isfinite(self.raw_prior[0]))
        # ops too small to get a verdict (below min_delta_ms) are all noise: they do not set the floor
        big = [i for i, (a, b) in enumerate(pairs) if a[0].size and b[0].size
               and max(np.median(a[0]), np.median(b[0])) >= th["min_delta_ms"]
               and min(np.median(a[0]), np.median(b[0])) > 0]
        self.z: tuple[dict, dict] = ({}, {})
        self.c, self.delta, self.shift_var, self.df_lost = 0.0, 0.0, 0.0, 0
        self.prior = self.raw_prior
        self.adjusted: list[tuple] = []   # per pair: its state-corrected unit medians and loading (row(i=...))
        if not self.replicated:   # one process a side: how far unchanged ops drift between two processes
            lr = [np.log(np.median(pairs[i][1][0]) / np.median(pairs[i][0][0])) for i in big]
            gross = max(2 * float(np.log1p(th["min_effect"])), float(np.log(2.0)))   # 2x: a change, not drift
            self.floor = cross_op_floor([x for x in lr if abs(x) <= gross], th["noise_k"])
            return
        self.z = _scores([tabs[i] for i in big] if len(big) >= MIN_SPEED_OPS else tabs)
        self.df_lost = 1 if self.z[0] else 0
        self.adjusted = adj = [self._adjust(ta, tb) for ta, tb in tabs]
        self.prior = variance_prior([(ya, yb) for ya, yb, _ in adj], self.df_lost)
        s0, d0 = self.prior
        per_op = []   # (log ratio, loading, its sampling variance, moderated variance, df) of each big op
        for i in big:
            ya, yb, load = adj[i]
            if ya.size and yb.size:
                s2, df = pooled_variance(ya, yb, self.df_lost)
                s2m = ((df * s2 if df else 0.0) + d0 * s0) / (df + d0)
                per_op.append((float(yb.mean() - ya.mean()), load, s2m * (1 / ya.size + 1 / yb.size), s2m, df))
        self.c, self.delta, n_used = side_shift([p[0] for p in per_op], [p[1] for p in per_op],
                                                state_bound=th["noise_k"] * _pooled_sd(self.z, of_means=True),
                                                min_effect=th["min_effect"])
        if n_used:   # the variance of a robust fit over n_used ops' ratios (pi/2 x a mean's)
            self.shift_var = float(np.pi / 2 * np.median([p[2] for p in per_op]) / n_used)
        # how far all ops moved apart beyond their sampling noise (drift between the sides); only unchanged ops
        # measure it: leave out a gross change (twice its own floor) and an op its own process-level test
        # already calls changed (significant and beyond its floor)
        own_min = float(np.log1p(th["min_effect"]))
        lr, sv = [], []
        for d, load, v, s2m, df in per_op:
            e = d - self.c - load * self.delta
            own = max(own_min, th["noise_k"] * np.sqrt(s2m))
            if abs(e) > 2 * own or (abs(e) > own and v > 0 and t_pvalue(e / np.sqrt(v), df + d0) < th["alpha"]):
                continue
            lr.append(e)
            sv.append(v)
        self.floor = cross_op_floor(lr, th["noise_k"], sv)

    def _adjust(self, ta: tuple, tb: tuple) -> tuple[np.ndarray, np.ndarray, float]:
        """One op's log unit medians on both sides with its share of each process's state taken off, and its
        loading (its own sensitivity to the state, fitted on its values centred per side)."""
        (la, ya), (lb, yb) = ta, tb
        if not self.z[0] or not ya.size or not yb.size:
            return ya, yb, 0.0
        za = np.array([self.z[0].get(str(u), 0.0) for u in la])
        zb = np.array([self.z[1].get(str(u), 0.0) for u in lb])
        load = state_loading(np.r_[ya - ya.mean(), yb - yb.mean()], np.r_[za, zb])
        return ya - load * za, yb - load * zb, load

    def row(self, a: tuple | None, b: tuple | None, *, whole: bool = False, i: int | None = None) -> dict[str, Any]:
        """``a``/``b``: ``(samples, units)`` or None for a one-sided row. ``whole``: the whole program's latency,
        judged as measured (its processes' state scatter is its own spread, nothing taken off). ``i``: the
        index of ``(a, b)`` in the pairs the statistics were made from (its correction is reused)."""
        th = self.th
        pa_ = float(np.median(a[0])) if a is not None and a[0].size else None
        pb_ = float(np.median(b[0])) if b is not None and b[0].size else None
        row: dict[str, Any] = {"a_p50_ms": pa_, "b_p50_ms": pb_, "delta_ms": None, "ratio": None,
                               "a_runs": 0 if a is None else int(a[0].size),
                               "b_runs": 0 if b is None else int(b[0].size)}
        if pa_ is None or pb_ is None:
            row.update(verdict="only_a" if pb_ is None else "only_b", p_value=None, test=None)
            return row
        common = {"alpha": th["alpha"], "min_effect": th["min_effect"], "min_delta_ms": th["min_delta_ms"],
                  "noise_k": th["noise_k"]}
        if self.replicated and whole:
            v = replicated_verdict(unit_medians(*a), unit_medians(*b), prior=self.raw_prior, pa_ms=pa_, pb_ms=pb_,
                                   **common)
        elif self.replicated:
            ya, yb, load = (self.adjusted[i] if i is not None and self.adjusted
                            else self._adjust(unit_table(*a), unit_table(*b)))
            v = replicated_verdict(ya, yb, prior=self.prior, pa_ms=pa_, pb_ms=pb_, shared_floor=self.floor,
                                   shift=self.c + load * self.delta, shift_var=self.shift_var,
                                   df_lost=self.df_lost, **common)
        else:
            v = verdict(a[0], b[0], method=th["method"], floor=self.floor, **common)
        row.update(delta_ms=pb_ - pa_, ratio=(pb_ / pa_) if pa_ > 0 else None, verdict=v.verdict, p_value=v.p,
                   test=v.method, floor=v.floor, noisy=v.noisy)
        if v.units is not None:
            row.update(a_units=v.units[0], b_units=v.units[1])
        if v.ratio is not None:
            row.update(unit_ratio=v.ratio, spread=v.spread)
        if v.ci_low_ms is not None:
            row.update(ci_low_ms=v.ci_low_ms, ci_high_ms=v.ci_high_ms)
        return row

    def summary(self) -> dict[str, Any]:
        """The process-state correction as the report shows it: each process's state (a time factor on the
        typical op's scale), their spread, and what the sides shared by chance."""
        if not self.replicated:
            return {}
        procs = [{"side": side, "unit": u, "factor": float(np.exp(z))}
                 for side, zs in zip("AB", self.z) for u, z in sorted(zs.items())]
        return {"process_speed": procs, "speed_spread": float(np.expm1(_pooled_sd(self.z))),
                "program_shift": float(np.exp(self.c)), "state_shift": float(np.exp(self.delta))}


def _pooled_sd(sides: tuple[dict, dict], of_means: bool = False) -> float:
    """The standard deviation of a per-unit quantity pooled over both sides (each centred on its side); with
    ``of_means`` that of the difference of the two sides' means (0 without a unit a side)."""
    a, b = (np.array(list(s.values())) for s in sides)
    if not a.size or not b.size or a.size + b.size < 3:
        return 0.0
    sd = float(np.sqrt(((a ** 2).sum() + (b ** 2).sum()) / (a.size + b.size - 2)))
    return sd * float(np.sqrt(1 / a.size + 1 / b.size)) if of_means else sd


def _scores(tabs: list[tuple]) -> tuple[dict[str, float], dict[str, float]]:
    """Each unit's state score per side (:func:`~etlens.fleet.stats.state_scores`) by unit label, from the ops
    seen in every unit of both sides; empty when there are too few."""
    la = sorted({str(u) for ta, _ in tabs for u in ta[0]})
    lb = sorted({str(u) for _, tb in tabs for u in tb[0]})
    if len(la) + len(lb) < 3 or min(len(la), len(lb)) < 1:
        return {}, {}
    rows = []
    for (ua, ya), (ub, yb) in tabs:
        if [str(u) for u in ua] == la and [str(u) for u in ub] == lb:
            rows.append(np.r_[ya - ya.mean(), yb - yb.mean()])
    z = state_scores(np.array(rows)) if len(rows) >= MIN_SPEED_OPS else np.zeros(0)
    if not z.size or not np.any(z):
        return {}, {}
    return dict(zip(la, z[:len(la)].tolist())), dict(zip(lb, z[len(la):].tolist()))


def _module_samples(ops, unit: str = "file") -> dict[str, tuple]:
    d = ops[ops["module_path"].notna()]
    if d.empty:
        return {}
    keys = ["module_path", "file", "run"] + ([unit] if unit not in ("file", "run") else [])
    per_run = d.groupby(keys, sort=False, dropna=False)["duration_ms"].sum().reset_index()
    return {m: (g["duration_ms"].to_numpy(), _units(g, unit)) for m, g in per_run.groupby("module_path", sort=True)}


def compare(a: Side, b: Side, *, alpha: float = DEFAULTS["alpha"], min_effect: float = DEFAULTS["min_effect"],
            min_delta_ms: float = DEFAULTS["min_delta_ms"], noise_k: float = DEFAULTS["noise_k"],
            unit: str = "file", method: str = "auto", fdr: float = DEFAULTS["fdr"]) -> dict[str, Any]:
    """Compare side ``a`` to side ``b``; a JSON-ready dict (``rows``, ``modules``, ``summary``, ``samples``).

    ``rows``: one per matched op (``node, module_path, event_name, block, debug_handles, a_p50_ms,
    b_p50_ms, delta_ms, ratio, verdict, p_value, test, floor, noisy, match``; with processes as the unit
    also ``a_units, b_units, unit_ratio, spread``), worst first; ``modules``: the same per module path;
    ``summary``: whole-model latency (``Method::execute``), counts and ``noisy`` (the unchanged ops whose
    own spread sets their effect floor). ``samples`` (not for JSON) holds the per-run durations the HTML draws.
    ``unit``: the column that identifies a replicate (``file`` = one process, or ``device``). ``fdr``: a
    verdict also needs its Benjamini-Hochberg ``q_value`` (over the op rows, and over the module rows) below it.
    """
    if unit not in ("file", "device"):
        raise EtlensError(f"compare: unit must be 'file' (a process) or 'device', not {unit!r}")
    for name, v in (("alpha", alpha), ("fdr", fdr)):
        if not 0 < v <= 1:
            raise EtlensError(f"compare: --{name} is a probability in (0, 1], not {v!r} (e.g. --{name} 0.05)")
    th = {"alpha": alpha, "min_effect": min_effect, "min_delta_ms": min_delta_ms, "noise_k": noise_k,
          "method": method, "unit": unit, "fdr": fdr}
    ops_a, lat_a = load_side(a)
    ops_b, lat_b = load_side(b)
    ga, gb = _groups(ops_a, unit), _groups(ops_b, unit)
    matched = _match(ga, gb)

    def side(g: dict, k: tuple | None) -> tuple | None:
        return (g[k]["samples"], g[k]["units"]) if k is not None else None

    stats = _Stats([(side(ga, ka), side(gb, kb)) for ka, kb, _ in matched if ka and kb], th)
    rows, samples, both = [], {}, 0
    for ka, kb, how in matched:
        ref = ka or kb
        ea, eb = ga.get(ka) if ka else None, gb.get(kb) if kb else None
        row = {"node": (ea or eb)["node"], "module_path": ref[3], "event_name": ref[1], "block": ref[0],
               "debug_handles": ref[2], "occurrence": ref[4]}
        row.update(stats.row(side(ga, ka), side(gb, kb), i=both if ka and kb else None))
        both += bool(ka and kb)
        row["match"] = how
        samples[len(rows)] = (ea["samples"] if ea else np.zeros(0), eb["samples"] if eb else np.zeros(0))
        rows.append(row)
    _fdr(rows, fdr)
    order = sorted(range(len(rows)), key=lambda i: _rank(rows[i]))
    rows = [rows[i] for i in order]
    samples = {j: samples[i] for j, i in enumerate(order)}
    ma, mb = _module_samples(ops_a, unit), _module_samples(ops_b, unit)
    modules = []
    for m in sorted(set(ma) | set(mb)):
        r = {"module_path": m}
        r.update(stats.row(ma.get(m), mb.get(m)))
        modules.append(r)
    _fdr(modules, fdr)
    modules.sort(key=_rank)
    model = stats.row((lat_a["duration_ms"].to_numpy(), _units(lat_a, unit)),
                      (lat_b["duration_ms"].to_numpy(), _units(lat_b, unit)), whole=True)
    count = {k: sum(r["verdict"] == k for r in rows + modules) for k in (REGRESSION, IMPROVEMENT)}
    noisy = [{"event_name": r["event_name"], "module_path": r["module_path"], "occurrence": r["occurrence"],
              "spread": r.get("spread"), "floor": r.get("floor"), "a_p50_ms": r["a_p50_ms"]}
             for r in rows if r.get("noisy") and r["verdict"] == "same"]
    summary = {"a": a.label, "b": b.label, "model_latency": model, "regressions": count[REGRESSION],
               "improvements": count[IMPROVEMENT], "ops": len(rows), "thresholds": th,
               "unit": unit if stats.replicated else "run (one process a side: process-to-process spread unknown)",
               "prior_spread": float(np.expm1(np.sqrt(stats.prior[0]))) if stats.replicated else None,
               "cross_op_floor": float(np.exp(stats.floor)),
               "noisy": noisy, "latency_by_group": _latency_groups(lat_a, lat_b), **stats.summary()}
    return CompareResult(rows=rows, modules=modules, summary=summary, samples=samples)


def _fdr(rows: list[dict], fdr: float) -> None:
    """Many ops are tested at once: each row gets its Benjamini-Hochberg ``q_value`` (the false discovery rate
    at which it would be called), and a verdict whose ``q_value`` is not below ``fdr`` goes back to ``same``.
    Without it, 11 ops tested at p < 0.01 give a same-build comparison a 1-in-10 chance of one false call and
    200 ops make one likely (the effect floor alone does not stop an op whose few processes happen to agree).
    """
    tested = [r for r in rows if r.get("p_value") is not None]
    if not tested:
        return
    q = fdr_bh(np.array([r["p_value"] for r in tested], dtype=np.float64))
    for r, qv in zip(tested, q):
        r["q_value"] = float(qv)
        if r["verdict"] in (REGRESSION, IMPROVEMENT) and qv >= fdr:
            r["verdict"] = "same"


def _rank(r: dict) -> tuple:
    order = {REGRESSION: 0, IMPROVEMENT: 1, "only_a": 2, "only_b": 2, "same": 3}
    return (order.get(r["verdict"], 4), -abs(r.get("delta_ms") or 0.0))


def _latency_groups(lat_a, lat_b) -> list[dict[str, Any]]:
    """Whole-model latency samples per (side, device, build), for the HTML's distribution plot."""
    out = []
    for side, lat in (("A", lat_a), ("B", lat_b)):
        if lat.empty:
            continue
        g = lat.assign(device=lat["device"].fillna("?"), build=lat["build"].fillna("?"))
        for (dev, bld), x in g.groupby(["device", "build"], sort=True):
            out.append({"side": side, "device": dev, "build": bld, "samples": x["duration_ms"].round(6).tolist()})
    return out
