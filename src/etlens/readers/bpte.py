"""Read an ExecuTorch *bundled program* (``.bpte``): a program plus its test cases, without ExecuTorch.

``executorch.devtools.bundled_program`` writes a FlatBuffer (identifier ``BP08``) whose root
``BundledProgram`` holds ``version``, ``method_test_suites`` (per method: ``method_name`` and
``test_cases``, each with ``inputs`` and ``expected_outputs`` — ``Value`` unions of ``Tensor``
(scalar type, sizes, raw data, dim order), ``Int``, ``Bool`` or ``Double``) and ``program``, the
bytes of an ordinary ``.pte`` (32-byte aligned), which :mod:`etlens.readers.pte` parses.

:func:`read` returns a :class:`BpteArtifact`: ``program`` (the embedded ``PteArtifact``),
``suites`` (:class:`TestSuite` → :class:`TestCase` → :class:`BundledValue`), the program's graphs
and a summary listing each method's test cases (``etlens info X.bpte``). Tensor data stays in the
file until :meth:`BundledValue.array` decodes it (numpy only). Truncated files and offsets
outside the file raise one :class:`~etlens.errors.FormatError` / ``TruncatedFileError`` naming the
field, like every reader.

Example::

    from etlens.readers.bpte import read
    b = read("model.bpte")
    case = b.suites[0].cases[0]
    [v.describe() for v in case.inputs]       # ['float32[1, 16]']
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormatError
from ..model import Graph
from ..schema import bundled_program_fbs as bfb
from ..schema import dtype_name
from ._flatbuffers import FlatBuffer, Table
from .base import Artifact, read_limited
from .pte import PteArtifact, read_pte_bytes

__all__ = ["FILE_IDENTIFIER", "BundledValue", "TestCase", "TestSuite", "BpteArtifact", "read", "read_bpte_bytes"]

FILE_IDENTIFIER = bfb.FILE_IDENTIFIER
_HINT = "re-create it with executorch.devtools.bundled_program (serialize_from_bundled_program_to_flatbuffer)"


@dataclass
class BundledValue:
    """One input or expected output: ``kind`` is ``tensor``, ``int``, ``bool``, ``double`` or ``none``."""

    kind: str
    scalar_type: int = 0
    sizes: tuple[int, ...] = ()
    dim_order: tuple[int, ...] = ()
    value: Any = None               # the scalar of an Int/Bool/Double
    data: Any = None                # a memoryview of the tensor bytes

    @property
    def dtype(self) -> str:
        return dtype_name(self.scalar_type) if self.kind == "tensor" else self.kind

    def describe(self) -> str:
        return f"{self.dtype}{list(self.sizes)}" if self.kind == "tensor" else f"{self.kind} {self.value!r}"

    def array(self) -> Any:
        """The tensor as a numpy array (or the scalar), decoded from the file's bytes."""
        if self.kind != "tensor":
            return self.value
        import numpy as np

        from ..schema import SCALAR_TYPES

        info = SCALAR_TYPES.get(self.scalar_type)
        if info is None or info.storage is None:
            raise FormatError(f"bundled tensor of scalar type {self.scalar_type} cannot be decoded")
        if any(s < 0 for s in self.sizes):
            raise FormatError(f"bundled tensor {self.describe()} has a negative size; the file is corrupt; {_HINT}")
        n = 1
        for s in self.sizes:
            n *= s
        dt = np.dtype(info.storage)
        if len(self.data) < n * dt.itemsize:
            raise FormatError(f"bundled tensor {self.describe()} needs {n * dt.itemsize} bytes but holds "
                              f"{len(self.data)}; {_HINT}")
        return np.frombuffer(self.data, dt, n).reshape(self.sizes).copy()

    def to_json(self) -> dict[str, Any]:
        if self.kind == "tensor":
            return {"kind": "tensor", "dtype": self.dtype, "shape": list(self.sizes)}
        return {"kind": self.kind, "value": self.value}


@dataclass
class TestCase:
    index: int
    inputs: list[BundledValue]
    expected_outputs: list[BundledValue]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "inputs": [v.to_json() for v in self.inputs],
                "expected_outputs": [v.to_json() for v in self.expected_outputs]}


@dataclass
class TestSuite:
    method_name: str
    cases: list[TestCase] = field(default_factory=list)


def _value(t: Table) -> BundledValue:
    tag, body = t.variant(bfb.Value.val)
    name = bfb.ValueUnion.NAMES[tag] if tag < len(bfb.ValueUnion.NAMES) else f"unknown_{tag}"
    if body is None:
        return BundledValue("none")
    if name == "Tensor":
        T = bfb.Tensor
        return BundledValue("tensor", scalar_type=body.get(T.scalar_type), sizes=tuple(body.items(T.sizes)),
                            dim_order=tuple(body.items(T.dim_order)), data=body.blob(T.data))
    if name == "Int":
        return BundledValue("int", value=body.get(bfb.Int.int_val))
    if name == "Bool":
        return BundledValue("bool", value=bool(body.get(bfb.Bool.bool_val)))
    if name == "Double":
        return BundledValue("double", value=body.get(bfb.Double.double_val))
    return BundledValue("none")


def read_bpte_bytes(data: bytes | bytearray | memoryview, name: str = "<bytes>") -> "BpteArtifact":
    """Parse the bytes of a ``.bpte``: the test suites and the embedded program."""
    fb = FlatBuffer(data, name, identifier=FILE_IDENTIFIER, what="ExecuTorch bundled program")
    root = fb.root("bundled_program")
    B = bfb.BundledProgram
    suites = []
    for s in root.children(B.method_test_suites):
        suite = TestSuite(s.text(bfb.BundledMethodTestSuite.method_name, "") or "")
        for i, c in enumerate(s.children(bfb.BundledMethodTestSuite.test_cases)):
            C = bfb.BundledMethodTestCase
            suite.cases.append(TestCase(i, [_value(v) for v in c.children(C.inputs)],
                                        [_value(v) for v in c.children(C.expected_outputs)]))
        suites.append(suite)
    start, size = root.blob_span(B.program)
    if not size:
        raise FormatError(f"{name}: bundled program has no embedded program (field program is empty); {_HINT}")
    program = read_pte_bytes(memoryview(data)[start:start + size], name=f"{name} (embedded program)")
    return BpteArtifact(format="bpte", path=name, version=root.get(B.version), suites=suites, pte=program,
                        program_offset=start, program_size=size, data=data)


def read(path: str | os.PathLike[str]) -> "BpteArtifact":
    """Parse a ``.bpte`` file (see :func:`read_bpte_bytes`)."""
    path = os.fspath(path)
    return read_bpte_bytes(read_limited(path), name=path)


@dataclass
class BpteArtifact(Artifact):
    """A parsed ``.bpte``: ``pte`` (the embedded program), ``suites`` and where the program sits."""

    version: int = 0
    suites: list[TestSuite] = field(default_factory=list)
    pte: PteArtifact | None = None
    program_offset: int = 0
    program_size: int = 0
    data: Any = field(default=None, repr=False)

    @property
    def program(self) -> Any:
        return self.pte.program if self.pte is not None else None

    def graphs(self) -> dict[str, Graph]:
        return self.pte.graphs() if self.pte is not None else {}

    def program_bytes(self) -> bytes:
        """The embedded ``.pte`` bytes."""
        return bytes(self.data[self.program_offset:self.program_offset + self.program_size])

    def summary(self) -> dict[str, Any]:
        out = self.pte.summary() if self.pte is not None else {}
        out = {"format": "bpte", "path": self.path, "bundled_version": self.version,
               "program_bytes": self.program_size, **{k: v for k, v in out.items() if k not in ("format", "path")}}
        out["test_suites"] = [{"method": s.method_name, "cases": [c.to_json() for c in s.cases]}
                              for s in self.suites]
        return out
