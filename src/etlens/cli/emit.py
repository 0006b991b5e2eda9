"""The one output path of every data command: ``--format``, ``-o``, one JSON style, one NaN policy.

A data command computes its result and hands it to :func:`emit` in the shapes it has; the emitter
picks the one ``--format`` asks for, renders it and writes it to ``-o FILE`` (or stdout):

* ``doc`` — the JSON document (a dict or a list), every field kept: ``--format json``.
  Default: the rows, as a list of row objects.
* ``rows`` — the table: a pandas DataFrame, a list of dicts (row objects), or ``(columns, rows)``:
  ``--format csv`` / ``tsv`` (one header row, one row per item). Default: the JSON document
  flattened to ``field,value`` rows (:func:`flatten`), for documents with no natural table.
* ``text`` — what people read: ``--format table``. Default: ``rows`` as aligned columns (plus ``footer``).

Each of the three may also be a zero-argument function returning it, so a shape that costs something
(a DataFrame, a long report) is only built when its format is asked for.

One JSON style: two-space indent, keys in the order the result gives them, tuples as lists, numpy
scalars and arrays as plain numbers and lists, anything else as its ``str``.

One NaN policy, the same in every command:

============  ===========================  ==========================================
format        NaN, +inf, -inf              None
============  ===========================  ==========================================
json          ``null``                     ``null``
csv / tsv     empty cell                   empty cell
table         as printed (``nan``, ``inf``)  empty cell
============  ===========================  ==========================================

(JSON has no NaN or infinity: ``json.loads`` in other languages rejects them, so a missing or
unbounded value is ``null``; read it with the metric's own meaning, e.g. SNR ``null`` where a
result is exact.)

Example — a new command (``etlens llm-diff``) needs no format logic of its own::

    from .emit import emit
    from .options import add_output

    def register(sub):
        p = add_command(sub, "llm-diff", "...", "etlens llm-diff a.etdp b.etdp --format csv")
        add_output(p)                      # --format {table,csv,tsv,json}, -o FILE
        p.set_defaults(func=run)

    def run(args):
        res = llm_diff(args.a, args.b)     # any result object
        emit(args, doc=res.to_json(),      # --format json: every field
             rows=res.rows,                # --format csv/tsv: a DataFrame or list of dicts
             text=lambda: res.to_text())   # --format table
        return EXIT_OK

A command whose output is one table needs only ``rows``: ``emit(args, rows=df)`` prints it as an
aligned table, CSV, TSV or a JSON list of row objects.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._common import write_text

__all__ = ["JSON_INDENT", "emit", "render", "wants_data", "to_jsonable", "dumps", "render_rows",
           "render_records", "flatten"]

#: the one JSON indent of the command line
JSON_INDENT = 2


def wants_data(args: Any) -> bool:
    """True when ``--format`` is machine-readable (csv/tsv/json): stdout must then hold the data only,
    so notes and summaries go to stderr."""
    return args.format != "table"


def _nonfinite(v: Any) -> bool:
    if v is None or isinstance(v, (bool, int, str)):
        return False
    try:
        return not math.isfinite(v)
    except (TypeError, ValueError, OverflowError):
        return False


def _key(k: Any) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, bool):
        return "true" if k else "false"
    return str(k)


def to_jsonable(v: Any) -> Any:
    """``v`` with the JSON style and NaN policy applied: NaN/inf -> None, tuples -> lists, numpy -> Python,
    pandas NA/NaT -> None, dict keys -> str, other objects -> ``str``."""
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {_key(k): to_jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [to_jsonable(x) for x in v]
    if type(v).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(v, "tolist") and hasattr(v, "dtype"):   # numpy scalar or array
        return to_jsonable(v.tolist())
    return str(v)


def dumps(doc: Any) -> str:
    """``doc`` as JSON text in the one style (see the module docstring)."""
    import json

    return json.dumps(to_jsonable(doc), indent=JSON_INDENT, allow_nan=False)


def _cell(value: Any) -> Any:
    """A value as one table/CSV cell: lists joined with ``, ``, dicts as ``k=v``, None as empty."""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(_cell(v)) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in value.items())
    return "" if value is None else value


def _csv_cell(value: Any) -> Any:
    """A CSV/TSV cell: NaN/inf empty, also inside a list cell."""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(_csv_cell(v)) for v in value)
    return "" if _nonfinite(value) else _cell(value)


def _value(v: Any) -> Any:
    return v() if callable(v) and not _is_frame(v) else v


def _is_frame(rows: Any) -> bool:
    return hasattr(rows, "to_csv") and hasattr(rows, "columns")


def _table(rows: Any, columns: Sequence[str] | None) -> tuple[list[str], list[list[Any]]]:
    """``(columns, rows)`` of a list of dicts or a ``(columns, rows)`` pair."""
    if isinstance(rows, tuple) and len(rows) == 2 and not isinstance(rows[0], dict):
        return list(rows[0]), [list(r) for r in rows[1]]
    records = list(rows)
    if columns is None:
        seen: dict[str, None] = {}
        for rec in records:
            seen.update(dict.fromkeys(rec))
        columns = list(seen)
    return list(columns), [[rec.get(c) for c in columns] for rec in records]


def _frame_csv(df: Any, sep: str) -> str:
    import numpy as np

    floats = df.select_dtypes(include="floating").columns
    if len(floats):
        df = df.copy()
        df[floats] = df[floats].replace([np.inf, -np.inf], np.nan)
    return df.to_csv(sep=sep, index=False)


def render(args: Any, *, doc: Any = None, rows: Any = None, columns: Sequence[str] | None = None,
           text: str | Callable[[], str] | None = None, footer: str | None = None) -> str:
    """The text :func:`emit` writes, for ``args.format`` (see the module docstring for the shapes)."""
    fmt = args if isinstance(args, str) else args.format
    doc, rows = _value(doc), _value(rows)
    if fmt == "json":
        if doc is None:
            if _is_frame(rows):
                doc = rows.to_dict(orient="records")
            else:
                cols, data = _table(rows, columns)
                doc = [dict(zip(cols, r)) for r in data]
        return dumps(doc)
    if fmt in ("csv", "tsv"):
        sep = "\t" if fmt == "tsv" else ","
        if rows is None:
            rows = (["field", "value"], flatten(to_jsonable(doc)))
        if _is_frame(rows):
            return _frame_csv(rows[list(columns)] if columns else rows, sep)
        import csv
        import io

        cols, data = _table(rows, columns)
        buf = io.StringIO()
        w = csv.writer(buf, delimiter=sep, lineterminator="\n")
        w.writerow(cols)
        w.writerows([[_csv_cell(c) for c in r] for r in data])
        return buf.getvalue()
    if text is not None:
        return text() if callable(text) else text
    from tabulate import tabulate

    if _is_frame(rows):
        shown = rows[list(columns)] if columns else rows
        out = tabulate(shown, headers="keys", tablefmt="simple", showindex=False)
    else:
        cols, data = _table(rows, columns)
        out = tabulate([[_cell(c) for c in r] for r in data], headers=cols, floatfmt=".4g", tablefmt="simple")
    return out + (f"\n{footer}" if footer else "")


def emit(args: Any, *, doc: Any = None, rows: Any = None, columns: Sequence[str] | None = None,
         text: str | Callable[[], str] | None = None, footer: str | None = None) -> str:
    """Render the result for ``args.format`` and write it to ``args.output`` (stdout when absent or ``-``).

    Returns the text written. See the module docstring for ``doc`` / ``rows`` / ``text`` and an example.
    """
    out = render(args, doc=doc, rows=rows, columns=columns, text=text, footer=footer)
    write_text(out, getattr(args, "output", None))
    return out


# -- the (columns, rows) functions every command used before the emitter; kept as thin wrappers --------

def render_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str, *,
                floatfmt: str = ".4g", footer: str | None = None) -> str:
    """``(columns, rows)`` as a table, CSV, TSV or JSON (a list of row objects), through :func:`render`.

    ``footer`` (a summary line) is added under the table only: CSV/TSV/JSON stay pure data.
    Lists in cells become ``a, b`` in table/CSV/TSV and stay lists in JSON.
    """
    del floatfmt  # one float style: .4g
    return render(fmt, rows=(list(columns), [list(r) for r in rows]), footer=footer)


def render_records(records: Sequence[dict[str, Any]], fmt: str, *, columns: Sequence[str] | None = None,
                   footer: str | None = None) -> str:
    """A list of row objects (dicts) in ``fmt``; the columns are ``columns`` or every key, in first-seen order."""
    return render(fmt, rows=list(records), columns=columns, footer=footer)


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``(field path, value)`` rows of nested dicts/lists: the CSV/TSV form of a document with no natural table.

    >>> flatten({"a": {"b": 1}, "c": [2, {"d": 3}]})
    [('a.b', 1), ('c[0]', 2), ('c[1].d', 3)]
    """
    out: list[tuple[str, Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in obj):
        for i, v in enumerate(obj):
            out += flatten(v, f"{prefix}[{i}]")
    else:
        out.append((prefix, list(obj) if isinstance(obj, tuple) else obj))
    return out
