"""The report's view of the inside-the-delegate rows: a section, the summary card, the gap overlay.

``etlens report --model/--demo`` runs :func:`etlens.build.inside.inside_delegates` after the
device build (``--no-inside-delegates`` skips it) and hands the result to the page through three
hooks:

* :func:`attach` stores it on the :class:`~etlens.report.collect.ReportData` and puts every row's
  gap on the reference-graph nodes of its ops (the numeric-gap overlay then colours ops *inside*
  the delegate, not only the delegate's output);
* :func:`adjust_cards` makes the summary's "First divergence" card name the op inside the delegate;
* :func:`section` is the "Inside the delegates" table with the observer effect and the method.
"""

from __future__ import annotations

import html
from typing import Any

from .render import Card, Section, table_html

__all__ = ["attach", "adjust_cards", "section", "default_threshold", "run_for_report", "InsideRace"]

#: gaps below this (MSE / L1 / max_abs) are float rounding noise, not a divergence
NOISE_FLOOR = 1e-8


def default_threshold(rows: list[dict], higher_is_better: bool) -> float | None:
    """The report's default: 1% of the worst distance (where drift starts), never below rounding noise.

    Similarities (SNR, cosine) have no default: pass ``--fail-on-gap``.
    """
    gaps = [r["gap"] for r in rows if isinstance(r.get("gap"), float) and r["gap"] == r["gap"]]
    if higher_is_better or not gaps:
        return None
    worst = max(gaps)
    return max(worst * 0.01, NOISE_FLOOR) if worst > NOISE_FLOOR else None


def attach(data: Any, result: Any) -> None:
    """Store ``result`` on ``data`` and overlay its gaps on the matching reference-graph nodes."""
    data.inside = result
    if result is None:
        return
    names = {n.name for n in data.reference_graph} if data.reference_graph is not None else set()
    for r in result.rows:
        if r.get("gap") is None:
            continue
        for op in r["aot_ops"]:
            if op in names:
                data.gap_overlay[op] = float(r["gap"])


def adjust_cards(cards: list[Card], data: Any) -> None:
    """Point the "First divergence" card at the first op inside a delegate crossing the threshold."""
    result = getattr(data, "inside", None)
    if result is None:
        return
    fd = result.first_divergence
    if fd is None:
        value, detail, tone = "none", (f"no value inside the delegates crosses {result.threshold:.3g}"
                                       if result.threshold is not None else "no threshold"), "ok"
    else:
        where = f" inside {fd['backend']}" if fd.get("inside_delegate") else ""
        detail = (f"{', '.join(fd['aot_ops'])} in {fd.get('module_path') or '?'}{where}\n"
                  f"{result.metric} {fd['gap']:.3g} vs float (threshold {result.threshold:.3g})")
        value, tone = (fd["aot_ops"][0] if fd["aot_ops"] else fd["node"]), "warn"
    card = Card("First divergence", value, detail, tone)
    for i, c in enumerate(cards):
        if c.label == "First divergence":
            cards[i] = card
            return
    cards.append(card)


def _fmt(v: Any) -> Any:
    return "-" if v is None else v


def section(data: Any) -> Section | None:
    """The "Inside the delegates" section (``None`` when the analysis did not run)."""
    result = getattr(data, "inside", None)
    if result is None:
        return None
    rows, hl = [], {}
    fd = result.first_divergence
    for i, r in enumerate(result.rows):
        rows.append((", ".join(r["aot_ops"]), r.get("module_path") or "",
                     r.get("backend") if r.get("inside_delegate") else "portable",
                     str(tuple(r["debug_handles"])), str(r.get("shape")), _fmt(r.get("gap")),
                     _fmt(r.get("kernel_gap")), r.get("source_line") or ""))
        if fd is not None and i == fd["row"]:
            hl[i] = "bad"
        elif r.get("crosses_threshold"):
            hl[i] = "warn"
    oe, m = result.observer_effect, result.method
    lines = []
    if fd is not None:
        lines.append(f"first divergence: {', '.join(fd['aot_ops'])} in {fd.get('module_path')}, "
                     f"{result.metric} {fd['gap']:.4g} vs float" + (f"\n  at {fd['source_line']}"
                                                                    if fd.get("source_line") else ""))
    if not oe:
        lines.append("observer effect: not measured here (etlens gap --model … --inside-delegates measures it)")
    else:
        lines.append(f"observer effect: instrumented vs production final output max_abs {oe.get('max_abs'):.3g} "
                     f"({'identical' if oe.get('identical') else 'changed by the instrumentation'})")
    lines.append(f"method: {m.get('name')}, {m.get('cycles')} lower+run cycles; "
                 f"{m.get('exposed')} values exposed, {len(m.get('unexposed') or [])} could not be")
    body = f"<pre>{html.escape(chr(10).join(lines))}</pre>" + table_html(
        rows, ["ops", "module", "where", "debug handles", "shape", f"{result.metric} vs float",
               f"{result.metric} vs qdq (kernel)", "source"], table_id="inside-table", numeric=(5, 6), highlight=hl)
    intro = ("Values computed by the backend's own kernels inside each delegate (exposed as extra program outputs "
             "of an instrumented build), paired with the float model" + (
                 " and, for the kernel error alone, with the quantize-dequantize-simulated graph" if result.quantized
                 else "") + ".")
    return Section("inside", "Inside the delegates", body, intro)


def run_for_report(session: Any, *, metric: str, threshold: float | None, prepared: dict | None = None,
                   worker: Any = None) -> Any:
    """Run the analysis for the report on ``session``'s model; ``None`` when the backend delegates nothing.

    ``session`` (a :class:`~etlens.build.session.BuildSession` that already built the production
    program) lends its export, its quantized module and its worker child: no new export,
    quantization or child start; ``prepared`` (:func:`etlens.build.inside.engine.prepare`, computed
    while the session's child lowered) what the analysis needs from the export alone. The threshold
    defaults to :func:`default_threshold` of the rows (the first divergence then marks where drift
    starts). ``worker``: another child for the instrumented lower + run (:class:`InsideRace`).
    """
    from ..analysis.comparators import get_comparator
    from ..build.inside.engine import inside_delegates

    backend = session.backend
    if backend in (None, "", "portable", "none"):
        return None
    # the report already lowered + ran the production program; one more cycle for the instrumented one
    result = inside_delegates(session.model, session.inputs, backend=backend, quantize=session.quantize,
                              metric=metric, threshold=threshold, progress=False, observe=False, session=session,
                              prepared=prepared, worker=worker)
    if threshold is None:
        higher = bool(getattr(get_comparator(metric), "higher_is_better", False))
        t = default_threshold(result.rows, higher)
        if t is not None:
            from ..build.inside.engine import rethreshold

            rethreshold(result, t)
    return result


class InsideRace:
    """The report's inside-the-delegates analysis, raced on a second child against the production build.

    The instrumented program depends only on the session's export (or quantized module), not on
    the production lowering. So when the session's child starts lowering (this process only waits
    from then on), the race starts a second worker child and, in a thread, prepares what the
    analysis needs from the export (:func:`~etlens.build.inside.engine.prepare`). If that child
    has finished its ``import torch`` + backend before the production build is done, it lowers and
    runs the instrumented build there, overlapping the production build (on a big model, most of
    the inside view's cost disappears from the wall clock). If it has not, it is stopped and
    :meth:`result` runs the analysis in the session's warm child, exactly as without the race: a
    report never waits longer for its inside view than with one child (its cost is the second
    child's CPU, on a core the waiting parent leaves free).

    ``ETLENS_INSIDE_CHILD=0`` (or one CPU, or a backend lowered in this process): no second child;
    ``=1``: always use the second child (tests). Example (what ``report_from_model`` does)::

        race = InsideRace(session, metric="MSE", threshold=None)   # when the child starts lowering
        ...                                                        # session.build(...) finishes
        inside = race.result()                                     # InsideResult or None
    """

    def __init__(self, session: Any, *, metric: str, threshold: float | None, verbose: bool = False) -> None:
        import os
        import threading

        self._session, self._metric, self._threshold = session, metric, threshold
        self.prepared: dict = {}
        #: whether the second child ran the analysis (False: the session's child does, in result())
        self.raced = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._built = threading.Event()
        mode = os.environ.get("ETLENS_INSIDE_CHILD", "auto")
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self._force = mode == "1"
        self._worker: Any = None
        if (mode != "0" and (cpus >= 2 or self._force) and not session.in_process
                and isinstance(session.backend, str) and session.backend not in ("", "portable", "none")):
            from ..build.session import start_worker

            self._worker = start_worker(session.backend, verbose=verbose)
        self._thread = threading.Thread(target=self._run, name="etlens-inside", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from ..build.inside.engine import prepare

        self.prepared.update(prepare(self._session))
        w = self._worker
        if w is None:
            return
        while not self._force and not w.ready():
            if self._built.wait(0.05) and not w.ready():  # the production build won: its warm child does it
                w.kill()
                self._worker = None
                return
        self.raced = True
        try:
            self._value = run_for_report(self._session, metric=self._metric, threshold=self._threshold,
                                         prepared=self.prepared, worker=w)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._error = exc
        finally:
            w.close()

    def result(self) -> Any:
        """Call when the production build is done: the analysis (:func:`run_for_report`'s value)."""
        self._built.set()
        self._thread.join()
        if self.raced:
            if self._error is not None:
                raise self._error
            value = self._value
        else:
            value = run_for_report(self._session, metric=self._metric, threshold=self._threshold,
                                   prepared=self.prepared)
        if value is not None:
            value.method["child"] = "second child (raced the build)" if self.raced else "the session's child"
        return value

    def cancel(self) -> None:
        """The build failed: stop the second child and the thread."""
        self._built.set()
        if self._worker is not None:
            self._worker.kill()
        self._thread.join()
