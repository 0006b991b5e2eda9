#!/usr/bin/env python3
"""Generate etlens' FlatBuffer table descriptions from the ``.fbs`` schemas in the ExecuTorch wheel.

etlens reads ``.pte``, ``.etdp`` and XNNPACK payloads with its own bounds-checked FlatBuffer
reader (``src/etlens/readers/``). Which vtable slot holds which field, and with which type and
default, is a fact of ExecuTorch's schemas; this script turns those schemas into plain Python data
(``src/etlens/schema/*_fbs.py``) so the readers address fields by name
(``ProfileEvent.start_time``) instead of by slot number.

Run it after upgrading ExecuTorch, then review the diff::

    python scripts/gen_schema.py            # rewrite src/etlens/schema/*_fbs.py
    python scripts/gen_schema.py --check    # exit 1 when a generated file is out of date

The parser understands the subset of the FlatBuffers IDL these schemas use: ``include``,
``namespace``, ``enum``, ``union`` (with ``Name: Table`` aliases), ``table``, ``struct``, vector
types, defaults, ``(attributes)`` and comments. The wheel is located with ``importlib`` (it is not
imported).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import keyword
import os
import re
import sys
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "src", "etlens", "schema")

#: (schema path inside the executorch package, generated module name, folder under src/etlens or None for
#: --out). A backend's own payload format goes to its folder (etlens/backends/<name>/schema.py).
SCHEMAS = [
    ("schema/scalar_type.fbs", "scalar_type_fbs", None),
    ("schema/program.fbs", "program_fbs", None),
    ("devtools/etdump/etdump_schema_flatcc.fbs", "etdump_fbs", None),
    ("backends/xnnpack/serialization/schema.fbs", "schema", "backends/xnnpack"),
    ("backends/qualcomm/serialization/qc_compiler_spec.fbs", "schema", "backends/qnn"),
    ("devtools/bundled_program/schema/bundled_program_schema.fbs", "bundled_program_fbs", None),
]

SCALARS = {
    "bool": ("?", 1), "byte": ("b", 1), "ubyte": ("B", 1), "int8": ("b", 1), "uint8": ("B", 1),
    "short": ("h", 2), "ushort": ("H", 2), "int16": ("h", 2), "uint16": ("H", 2),
    "int": ("i", 4), "uint": ("I", 4), "int32": ("i", 4), "uint32": ("I", 4),
    "long": ("q", 8), "ulong": ("Q", 8), "int64": ("q", 8), "uint64": ("Q", 8),
    "float": ("f", 4), "double": ("d", 8), "float32": ("f", 4), "float64": ("d", 8),
}


@dataclass
class Decl:
    kind: str                   # enum | union | table | struct
    name: str
    base: str = ""              # enum underlying type
    members: list = field(default_factory=list)   # enum: (name, value); union: (name, table)
    fields: list = field(default_factory=list)    # table/struct: (name, type, default, attrs)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


_DECL = re.compile(r"\b(enum|union|table|struct)\s+(\w+)\s*(?::\s*([\w.]+))?\s*(?:\([^)]*\))?\s*\{(.*?)\}", re.S)


def parse(path: str, seen: set[str] | None = None) -> tuple[list[Decl], list[str]]:
    """Declarations of ``path`` (own first) and the paths of the files it includes."""
    text = _strip_comments(open(path, encoding="utf-8").read())
    includes = [os.path.join(os.path.dirname(path), m) for m in re.findall(r'include\s+"([^"]+)"\s*;', text)]
    decls: list[Decl] = []
    for kind, name, base, body in _DECL.findall(text):
        d = Decl(kind, name, base.split(".")[-1] if base else "")
        items = [s.strip() for s in re.split(r"[,;]" if kind in ("enum", "union") else r";", body)]
        if kind == "enum":
            nxt = 0
            for it in filter(None, items):
                mname, _, val = (p.strip() for p in it.partition("="))
                nxt = int(val, 0) if val else nxt
                d.members.append((mname, nxt))
                nxt += 1
        elif kind == "union":
            for it in filter(None, items):
                mname, _, table = (p.strip() for p in it.partition(":"))
                d.members.append((mname.split(".")[-1], (table or mname).split(".")[-1]))
        else:
            for it in filter(None, items):
                m = re.fullmatch(r"(\w+)\s*:\s*(\[?\s*[\w.]+\s*\]?)\s*(?:=\s*([^(]+?))?\s*(?:\((.*)\))?", it, re.S)
                if not m:
                    raise SystemExit(f"{path}: cannot parse field {it!r} of {kind} {name}")
                fname, ftype, default, attrs = m.groups()
                d.fields.append((fname, re.sub(r"\s+", "", ftype), (default or "").strip(), attrs or ""))
        decls.append(d)
    return decls, includes


def _literal(value: object) -> str:
    return repr(value).replace("'", '"')


def _wrap(head: str, items: list[str], tail: str, indent: str) -> str:
    """``head + ", ".join(items) + tail`` on one line, or packed into lines of at most 120 chars."""
    one = head + ", ".join(items) + tail
    if len(one) <= 120:
        return one
    lines, cur = [head.rstrip()], indent + "    "
    for it in items:
        piece = it + ","
        if len(cur) + len(piece) + 1 > 120 and cur.strip():
            lines.append(cur.rstrip())
            cur = indent + "    "
        cur += piece + " "
    lines.append(cur.rstrip())
    lines.append(indent + tail.strip())
    return "\n".join(lines)


def _py_name(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


def generate(schema_rel: str, module: str, pkg_dir: str, version: str, fbs_import: str = ".fbs") -> str:
    path = os.path.join(pkg_dir, schema_rel)
    own, includes = parse(path)
    known: dict[str, Decl] = {}
    for inc in includes:
        for d in parse(inc)[0]:
            known[d.name] = d
    for d in own:
        known[d.name] = d

    def resolve_default(ftype: str, default: str) -> object:
        decl = known.get(ftype)
        if decl is not None and decl.kind == "enum":
            if not default:
                return 0
            members = dict(decl.members)
            return members[default] if default in members else int(default, 0)
        if not default:
            return False if ftype == "bool" else (0.0 if ftype in ("float", "double", "float32", "float64") else 0)
        if ftype == "bool":
            return default == "true"
        return float(default) if ftype in ("float", "double", "float32", "float64") else int(default, 0)

    out: list[str] = []
    w = out.append
    w(f'"""FlatBuffer schema ``{os.path.basename(schema_rel)}`` of ExecuTorch {version}, as data.\n')
    w("GENERATED by ``scripts/gen_schema.py`` from the ExecuTorch wheel's")
    w(f"``executorch/{schema_rel}``: do not edit; rerun the script after upgrading")
    w("ExecuTorch. Each table is a class of :class:`~etlens.schema.fbs.Field`")
    w("(``FIELDS`` lists them in slot order); each enum or union a class of ``int`` constants with")
    w('``NAMES`` (value -> member name) and, for unions, ``TABLES`` (tag -> member table name).\n"""\n')
    w("from __future__ import annotations\n")
    w("from typing import Final\n")
    w(f"from {fbs_import} import Field\n")
    ident = re.search(r'file_identifier\s+"([^"]+)"\s*;', _strip_comments(open(path, encoding="utf-8").read()))
    names = ([] if ident is None else ["FILE_IDENTIFIER"]) + [d.name for d in own]
    w(_wrap("__all__ = [", [_literal(n) for n in names], "]", "") + "\n")
    if ident is not None:
        w("#: The 4 bytes at offset 4 of a buffer of this schema (after the root offset).")
        w(f"FILE_IDENTIFIER: Final = b{_literal(ident.group(1))}\n")
    for d in own:
        w("")
        w(f"class {d.name}:")
        if d.kind == "enum":
            w(f'    """``enum {d.name} : {d.base}``."""\n')
            for mname, val in d.members:
                w(f"    {_py_name(mname)}: Final = {val}")
            w(_wrap("    NAMES: Final[dict[int, str]] = {", [f"{v}: {_literal(m)}" for m, v in d.members], "}",
                    "    "))
        elif d.kind == "union":
            w(f'    """``union {d.name}``: the tag of each member (0 is NONE)."""\n')
            w("    NONE: Final = 0")
            for i, (mname, _) in enumerate(d.members, start=1):
                w(f"    {_py_name(mname)}: Final = {i}")
            w(_wrap("    NAMES: Final[tuple[str, ...]] = (",
                    [_literal(m) for m in ["NONE"] + [m for m, _ in d.members]], ")", "    "))
            w(_wrap("    TABLES: Final[tuple[str, ...]] = (",
                    [_literal(t) for t in [""] + [t for _, t in d.members]], ")", "    "))
        else:
            w(f'    """``{d.kind} {d.name}``."""\n')
            slot = 0
            attrs_out: list[str] = []
            for fname, ftype, default, attrs in d.fields:
                vec = ftype.startswith("[")
                base = ftype.strip("[]").split(".")[-1]
                decl = known.get(base)
                kw: dict[str, object] = {}
                if base in SCALARS or (decl is not None and decl.kind == "enum"):
                    scalar = base if base in SCALARS else decl.base  # type: ignore[union-attr]
                    fmt, size = SCALARS[scalar]
                    kw["fmt"], kw["size"] = fmt, size
                    if decl is not None:
                        kw["enum"] = base
                    kind = "scalar"
                    if not vec:
                        kw["default"] = resolve_default(base, default)
                elif base == "string":
                    kind = "string"
                elif decl is not None and decl.kind == "union":
                    kind = "union"
                elif decl is not None and decl.kind == "struct":
                    kind = "struct"
                elif decl is not None and decl.kind == "table":
                    kind = "table"
                else:
                    raise SystemExit(f"{path}: unknown type {base!r} of {d.name}.{fname}")
                if vec:
                    kw["elem_kind"] = kind
                    kind = "vector"
                if "deprecated" in attrs:
                    kw["deprecated"] = True
                idm = re.search(r"\bid\s*:\s*(\d+)", attrs)
                if idm:
                    slot = int(idm.group(1)) - (1 if kind == "union" else 0)
                args = [_literal(d.name), _literal(fname), str(slot), _literal(kind), _literal(base)] \
                    + [f"{k}={_literal(v)}" for k, v in kw.items()]
                w(_wrap(f"    {_py_name(fname)}: Final = Field(", args, ")", "    "))
                attrs_out.append(_py_name(fname))
                slot += 2 if kind == "union" else 1
            w(_wrap("    FIELDS: Final[tuple[Field, ...]] = (", attrs_out, ",)" if len(attrs_out) == 1 else ")",
                    "    "))
        w("")
    text = "\n".join(out).rstrip() + "\n"
    if "Field(" not in text:
        text = text.replace(f"from {fbs_import} import Field\n\n", "")
    return text


def find_wheel() -> tuple[str, str]:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("executorch is not installed; install the etlens[executorch] extra to regenerate")
    return list(spec.submodule_search_locations)[0], importlib.metadata.version("executorch")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a generated file differs")
    ap.add_argument("--out", default=OUT_DIR, help="where to write (default: src/etlens/schema)")
    args = ap.parse_args(argv)
    pkg_dir, version = find_wheel()
    stale = []
    for rel, module, folder in SCHEMAS:
        out_dir = args.out if folder is None else os.path.join(ROOT, "src", "etlens", folder)
        text = generate(rel, module, pkg_dir, version, ".fbs" if folder is None else "etlens.schema.fbs")
        target = os.path.join(out_dir, module + ".py")
        old = open(target, encoding="utf-8").read() if os.path.exists(target) else None
        if old != text:
            stale.append(target)
            if not args.check:
                with open(target, "w", encoding="utf-8") as f:
                    f.write(text)
    if args.check and stale:
        print("out of date (run scripts/gen_schema.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    for t in stale:
        print(f"wrote {t}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
