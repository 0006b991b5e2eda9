"""Read the Vela sidecar (``MODEL.vela.json``) that etlens writes when it compiles for Ethos-U.

Vela's estimates exist only at compile time: a ``.pte`` keeps the compiled command stream, not
Vela's report. So when etlens lowers a model for an Ethos-U target it stores, next to the ``.pte``
and ``.etrecord`` (same stem), a JSON document::

    {"format": "etlens-vela", "version": 1, "target": "ethos-u55-128", "vela_version": "5.2.0",
     "partitions": [{"index": 0,                      # one per Ethos-U delegate, in lowering order
                     "per_layer_csv": "...",           # Vela's <name>_per-layer.csv, verbatim
                     "summary_csv": "...",             # Vela's <name>_summary_<system config>.csv
                     "stdout": "...",                  # what Vela printed (summary + per-layer table)
                     "compile_flags": ["--accelerator-config=ethos-u55-128", ...],
                     "memory": {"scratch_bytes": 3216, "scratch_fast_bytes": 0,  # Vela's raw output
                                "scratch_region": 1, "scratch_fast_region": 1},  # (absent: older sidecars)
                     "tosa_ops": [{"tensor": "tosa_rescale_default_1", "op": "RESCALE",
                                   "node": "tosa_rescale_default_1", "debug_handle": 3,
                                   "module": "c1", "origin": ["convolution", "conv2d"]}, ...],
                     "tosa_file": "model.ethosu0.tosa"}],   # the delegated TOSA graph
     "cpu_reasons": {"aten_argmax_default": "..."}}   # the Arm partitioner's reason per rejected node

:func:`read_sidecar` parses it into a :class:`VelaSidecar` with typed per-layer rows
(:class:`VelaLayer`) and summaries (:class:`VelaSummary`); :func:`find_sidecar` locates it from the
path of a ``.pte`` or ``.etrecord``. Vela's two CSV dialects are accepted (the ``regor`` compiler's
columns and the older Python compiler's, which repeat ``Network%``). No Vela or ExecuTorch needed.

Example::

    sc = read_sidecar(find_sidecar("out/model.etrecord"))
    sc.partitions[0].summary.cycles_total, [l.name for l in sc.partitions[0].layers]
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from etlens.errors import FormatError, MissingDataError
from etlens.readers.base import read_limited

__all__ = ["VelaLayer", "VelaSummary", "VelaPartition", "VelaSidecar", "read_sidecar", "parse_sidecar",
           "find_sidecar", "sidecar_for", "parse_per_layer_csv", "parse_summary_csv", "parse_vela_stdout"]

_HINT = "rebuild with etlens (etlens report --model FILE.py:build --backend ethos-u55-128), which writes it"
_KIB = 1024.0


@dataclass(slots=True)
class VelaLayer:
    """One row of Vela's per-layer table: a scheduled NPU operation and its estimates.

    ``name`` is the TOSA tensor the operation writes (``#<n>`` for operations Vela inserted itself);
    ``cycles`` are its estimated cycles (the rows add up to the summary's ``cycles_total``).
    """

    index: int
    name: str
    op: str                 # Vela's operator after its graph rewrites (NNG operator)
    original_op: str        # the operator Vela read
    target: str = "NPU"
    cycles: float = 0.0
    npu_cycles: float = 0.0
    macs: float = 0.0
    sram_access_cycles: float = 0.0
    dram_access_cycles: float = 0.0
    on_flash_access_cycles: float = 0.0
    off_flash_access_cycles: float = 0.0
    staging_bytes: float = 0.0
    utilization_pct: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "op": self.op, "original_op": self.original_op,
                "target": self.target, "cycles": self.cycles, "npu_cycles": self.npu_cycles, "macs": self.macs,
                "sram_access_cycles": self.sram_access_cycles, "dram_access_cycles": self.dram_access_cycles,
                "on_flash_access_cycles": self.on_flash_access_cycles,
                "off_flash_access_cycles": self.off_flash_access_cycles, "staging_bytes": self.staging_bytes,
                "utilization_pct": self.utilization_pct}


@dataclass(slots=True)
class VelaSummary:
    """Vela's network summary of one compile (bytes, cycles, MACs, operator counts)."""

    accelerator: str = ""
    system_config: str = ""
    memory_mode: str = ""
    clock_hz: float = 0.0
    sram_bytes: int = 0
    dram_bytes: int = 0
    on_chip_flash_bytes: int = 0
    off_chip_flash_bytes: int = 0
    cycles_total: float = 0.0
    cycles_npu: float = 0.0
    macs: float = 0.0
    inference_time_s: float = 0.0
    npu_ops: int | None = None     # from Vela's printed summary (not in its CSV)
    cpu_ops: int | None = None

    @property
    def flash_bytes(self) -> int:
        return self.on_chip_flash_bytes + self.off_chip_flash_bytes

    def to_json(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator, "system_config": self.system_config,
                "memory_mode": self.memory_mode, "clock_hz": self.clock_hz, "sram_bytes": self.sram_bytes,
                "flash_bytes": self.flash_bytes, "dram_bytes": self.dram_bytes,
                "on_chip_flash_bytes": self.on_chip_flash_bytes, "off_chip_flash_bytes": self.off_chip_flash_bytes,
                "npu_cycles": self.cycles_total, "cycles_npu_only": self.cycles_npu, "macs": self.macs,
                "inference_time_s": self.inference_time_s, "npu_ops": self.npu_ops, "cpu_ops": self.cpu_ops}


@dataclass
class VelaPartition:
    """What Vela reported for one Ethos-U delegate, plus the TOSA op -> fx node records."""

    index: int
    layers: list[VelaLayer] = field(default_factory=list)
    summary: VelaSummary = field(default_factory=VelaSummary)
    stdout: str = ""
    compile_flags: list[str] = field(default_factory=list)
    tosa_ops: list[dict[str, Any]] = field(default_factory=list)
    tosa_file: str | None = None   # absolute path when the file is next to the sidecar
    #: Vela's scratch sizes from its raw output (``scratch_bytes``, ``scratch_fast_bytes``, regions);
    #: empty for sidecars written before etlens kept them
    memory: dict[str, int] = field(default_factory=dict)

    @property
    def fast_scratch_bytes(self) -> int | None:
        """Vela's fast scratch (arena cache) for this delegate, ``None`` when the sidecar lacks it."""
        v = self.memory.get("scratch_fast_bytes")
        return None if v is None else int(v)


@dataclass
class VelaSidecar:
    path: str | None
    target: str
    vela_version: str = ""
    partitions: list[VelaPartition] = field(default_factory=list)
    cpu_reasons: dict[str, str] = field(default_factory=dict)

    def totals(self) -> dict[str, Any]:
        """Vela's totals over every partition, combined as the runtime uses them: cycles, flash, DRAM and MACs
        add up (partitions run one after the other, all their weights are stored); SRAM and the fast scratch
        are the largest partition's (each delegate's scratch is allocated for its call and released after,
        so ``sram_bytes_sum``, the naive sum of Vela's summaries, overstates what the program needs)."""
        s = [p.summary for p in self.partitions]

        def total(vals: list[int | None]) -> int | None:
            return None if any(v is None for v in vals) else sum(v or 0 for v in vals)

        def peak(vals: list[int | None]) -> int | None:
            return None if any(v is None for v in vals) else max((v or 0 for v in vals), default=0)

        return {"target": self.target, "partitions": len(s),
                "npu_cycles": sum(x.cycles_total for x in s), "sram_bytes": max((x.sram_bytes for x in s), default=0),
                "sram_bytes_sum": sum(x.sram_bytes for x in s),
                "flash_bytes": sum(x.flash_bytes for x in s), "dram_bytes": sum(x.dram_bytes for x in s),
                "macs": sum(x.macs for x in s), "npu_ops": total([x.npu_ops for x in s]),
                "cpu_ops": total([x.cpu_ops for x in s]),
                "clock_hz": s[0].clock_hz if s else 0.0,
                "fast_scratch_bytes": peak([p.fast_scratch_bytes for p in self.partitions]),
                "inference_time_s": sum(x.inference_time_s for x in s)}


def _num(text: str | None) -> float:
    try:
        v = float(text) if text not in (None, "") else 0.0
    except ValueError:
        return 0.0
    return 0.0 if v != v else v  # NaN -> 0


def parse_per_layer_csv(text: str, where: str = "per-layer CSV") -> list[VelaLayer]:
    """Rows of Vela's ``*_per-layer.csv`` (both dialects)."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return []
    header = [h.strip() for h in rows[0]]
    col: dict[str, int] = {}
    for i, h in enumerate(header):
        key = h
        if h == "Network%":  # the old dialect: first for cycles, second for MACs
            key = "Network% (cycles)" if "Network% (cycles)" not in col else "Network% (MAC)"
        col.setdefault({"SRAM Usage": "Staging Usage", "Util%": "Util% (MAC)"}.get(key, key), i)
    if "Name" not in col or "Op Cycles" not in col:
        raise FormatError(f"{where}: header has no 'Name'/'Op Cycles' column ({', '.join(header)}); not Vela's "
                          f"per-layer table; {_HINT}")

    def get(row: list[str], key: str) -> str:
        i = col.get(key)
        return row[i] if i is not None and i < len(row) else ""

    out: list[VelaLayer] = []
    for row in rows[1:]:
        if not row or all(not c.strip() for c in row):
            continue
        out.append(VelaLayer(
            index=len(out), name=get(row, "Name").strip(), op=get(row, "NNG Operator") or get(row, "Original Operator"),
            original_op=get(row, "Original Operator"), target=get(row, "Target") or "NPU",
            cycles=_num(get(row, "Op Cycles")), npu_cycles=_num(get(row, "NPU")), macs=_num(get(row, "MAC Count")),
            sram_access_cycles=_num(get(row, "SRAM AC")), dram_access_cycles=_num(get(row, "DRAM AC")),
            on_flash_access_cycles=_num(get(row, "OnFlash AC")), off_flash_access_cycles=_num(get(row, "OffFlash AC")),
            staging_bytes=_num(get(row, "Staging Usage")), utilization_pct=_num(get(row, "Util% (MAC)"))))
    return out


def parse_summary_csv(text: str, where: str = "summary CSV") -> VelaSummary:
    """Vela's ``*_summary_<system config>.csv`` (one header row, one value row; memory in KiB)."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if len(rows) < 2:
        raise FormatError(f"{where}: expected a header and a value row, found {len(rows)} row(s); {_HINT}")
    d = dict(zip(rows[0], rows[1], strict=False))
    if "cycles_total" not in d:
        raise FormatError(f"{where}: no 'cycles_total' column; not Vela's summary; {_HINT}")

    def kib(key: str) -> int:
        return int(round(_num(d.get(key)) * _KIB))

    return VelaSummary(
        accelerator=d.get("accelerator_configuration", ""), system_config=d.get("system_config", ""),
        memory_mode=d.get("memory_mode", ""), clock_hz=_num(d.get("core_clock")),
        sram_bytes=kib("sram_memory_used"), dram_bytes=kib("dram_memory_used"),
        on_chip_flash_bytes=kib("on_chip_flash_memory_used"), off_chip_flash_bytes=kib("off_chip_flash_memory_used"),
        cycles_total=_num(d.get("cycles_total")), cycles_npu=_num(d.get("cycles_npu")), macs=_num(d.get("nn_macs")),
        inference_time_s=_num(d.get("inference_time")))


_OPS = re.compile(r"^(CPU|NPU) operators\s*=\s*(\d+)", re.M)


def parse_vela_stdout(text: str) -> dict[str, int]:
    """``{"npu_ops": n, "cpu_ops": m}`` from Vela's printed network summary (summed over summaries)."""
    out: dict[str, int] = {}
    for kind, n in _OPS.findall(text or ""):
        key = f"{kind.lower()}_ops"
        out[key] = out.get(key, 0) + int(n)
    return out


def _memory(doc: Any, where: str) -> dict[str, int]:
    if doc is None:
        return {}
    if not isinstance(doc, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                            for v in doc.values()):
        raise FormatError(f"{where}: expected an object of non-negative integers (scratch_bytes, "
                          f"scratch_fast_bytes, ...), got {doc!r:.200}; {_HINT}")
    return {str(k): int(v) for k, v in doc.items()}


def parse_sidecar(doc: Any, path: str | None = None) -> VelaSidecar:
    """A :class:`VelaSidecar` from the decoded JSON document (see the module docstring)."""
    where = path or "Vela sidecar"
    if not isinstance(doc, dict) or doc.get("format") != "etlens-vela":
        raise FormatError(f"{where}: not an etlens Vela sidecar (field 'format' is "
                          f"{doc.get('format') if isinstance(doc, dict) else type(doc).__name__!r}, expected "
                          f"'etlens-vela'); {_HINT}")
    if doc.get("version") != 1:
        raise FormatError(f"{where}: sidecar version {doc.get('version')!r} is not supported (expected 1); {_HINT}")
    parts = doc.get("partitions")
    if not isinstance(parts, list):
        raise FormatError(f"{where}: field 'partitions' must be a list; {_HINT}")
    base = os.path.dirname(path) if path else ""
    out = VelaSidecar(path=path, target=str(doc.get("target", "")), vela_version=str(doc.get("vela_version", "")),
                      cpu_reasons={str(k): str(v) for k, v in (doc.get("cpu_reasons") or {}).items()})
    for i, p in enumerate(parts):
        if not isinstance(p, dict):
            raise FormatError(f"{where}: partitions[{i}] must be an object; {_HINT}")
        pw = f"{where}: partitions[{i}]"
        summary = parse_summary_csv(p.get("summary_csv") or "", pw + ".summary_csv")
        counts = parse_vela_stdout(p.get("stdout") or "")
        summary.npu_ops = counts.get("npu_ops")
        summary.cpu_ops = counts.get("cpu_ops")
        tosa = p.get("tosa_file")
        out.partitions.append(VelaPartition(
            index=int(p.get("index", i)),
            layers=parse_per_layer_csv(p.get("per_layer_csv") or "", pw + ".per_layer_csv"),
            summary=summary, stdout=str(p.get("stdout") or ""), compile_flags=list(p.get("compile_flags") or []),
            tosa_ops=[o for o in p.get("tosa_ops") or [] if isinstance(o, dict)],
            tosa_file=os.path.join(base, tosa) if tosa and base else tosa,
            memory=_memory(p.get("memory"), pw + ".memory")))
    return out


def read_sidecar(path: str | os.PathLike[str]) -> VelaSidecar:
    """Parse a ``.vela.json`` file."""
    path = os.fspath(path)
    data = read_limited(path)
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{path}: not valid JSON ({exc}); the Vela sidecar is corrupt; {_HINT}") from exc
    return parse_sidecar(doc, path)


def sidecar_for(artifact: str | os.PathLike[str]) -> str:
    """The sidecar path that belongs to ``artifact`` (``out/model.pte`` -> ``out/model.vela.json``)."""
    stem, _ = os.path.splitext(os.fspath(artifact))
    return stem + ".vela.json"


def find_sidecar(artifact: str | os.PathLike[str], required: bool = False) -> str | None:
    """The existing sidecar of ``artifact``, else ``None`` (or :class:`MissingDataError` when ``required``)."""
    path = sidecar_for(artifact)
    if os.path.isfile(path):
        return path
    if required:
        raise MissingDataError(f"{artifact}: no Vela sidecar {path} next to it (Vela's estimates are only known at "
                               f"compile time); {_HINT}")
    return None
