"""Decode an XNNPACK delegate payload far enough to say what runs inside it.

An XNNPACK payload (the bytes ``XnnpackBackend`` receives at load time) is laid out as:

* a 30-byte header: 4 unused bytes, magic ``XH00`` at bytes 4-8 (the same place as a FlatBuffer
  identifier, so readers can tell the two apart), ``uint16`` header length, ``uint32`` offset and
  ``uint32`` size of the XNNGraph FlatBuffer, ``uint32`` offset and ``uint64`` size of the constant
  data (weights) that follow it;
* the ``XNNGraph`` FlatBuffer (identifier ``XN01``; older payloads ``XN00`` and no header):
  ``xnodes`` (the operations, in execution order, each a union of node types such as
  ``XNNFullyConnected`` or ``XNNConv2d`` plus a ``debug_handle``), ``xvalues`` (the tensors),
  ``input_ids``/``output_ids`` and ``constant_data`` (offset/size into the constant region, or a
  ``named_key`` into the program's named data).

:func:`decode_xnnpack` returns an :class:`XnnpackGraph` with the node types in order, the node
wiring (value ids in and out) and the sizes, enough to list the delegate's operations and to draw
the delegated subgraph. Nothing here needs the XNNPACK or ExecuTorch Python packages.

Example::

    g = decode_xnnpack(payload_bytes, name="model.pte delegate 0")
    g.op_names()          # ['XNNFullyConnected', 'XNNClamp', 'XNNFullyConnected']
"""

from __future__ import annotations

from typing import Any

import struct
from collections import Counter
from dataclasses import dataclass, field

from etlens.errors import FormatError
from etlens.model import Graph, Node, TensorMeta
from etlens.readers import FlatBuffer, Table
from etlens.schema.fbs import Field

from . import schema as xfb
from .schema import XNNDatatype, XNodeUnion

__all__ = ["XNODE_TYPES", "XNNPACK_DATATYPES", "XnnNode", "XnnValue", "XnnpackGraph", "decode_xnnpack",
           "is_xnnpack_backend"]

_X = XNNDatatype
#: ``XNNDatatype`` value -> readable name (torch spelling where one exists).
XNNPACK_DATATYPES: dict[int, str] = {
    _X.xnn_datatype_invalid: "invalid", _X.xnn_datatype_fp32: "float32", _X.xnn_datatype_fp16: "float16",
    _X.xnn_datatype_qint8: "qint8", _X.xnn_datatype_quint8: "quint8", _X.xnn_datatype_qint32: "qint32",
    _X.xnn_datatype_qcint8: "qcint8", _X.xnn_datatype_qcint32: "qcint32", _X.xnn_datatype_qcint4: "qcint4",
    _X.xnn_datatype_qdint8: "qdint8", _X.xnn_datatype_qbint4: "qbint4", _X.xnn_datatype_qpint8: "qpint8",
    _X.xnn_datatype_int32: "int32", _X.xnn_datatype_pfp32: "pfp32", _X.xnn_datatype_bf16: "bfloat16",
}
#: ``XNodeUnion`` tag -> XNNPACK node type (``2`` -> ``'XNNFullyConnected'``; 0 is ``'NONE'``).
XNODE_TYPES: tuple[str, ...] = XNodeUnion.NAMES


def _wiring(table: type) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
    """(input id fields, output id fields) of a node table, from the schema's field names: every
    ``*_id`` field is a value id, an output when its name starts with ``output``."""
    ids = [f for f in table.FIELDS if f.name.endswith("_id") and f.kind == "scalar"]  # type: ignore[attr-defined]
    return (tuple(f for f in ids if not f.name.startswith("output")),
            tuple(f for f in ids if f.name.startswith("output")))


# Node type -> where its value ids sit. Node tables share a few layouts (_XNNNode1x1, _XNNNode2x1,
# _XNNNodeConv, _XNNPooling2D, _XNNCat) plus some one-offs; the union says which table each uses.
_LAYOUT: dict[str, tuple[tuple[Field, ...], tuple[Field, ...]]] = {
    name: _wiring(getattr(xfb, table))
    for name, table in zip(XNodeUnion.NAMES[1:], XNodeUnion.TABLES[1:], strict=True)
}
# _XNNCat: only the first N inputs of XNNConcatenateN are meaningful.
_CAT_INPUTS = {"XNNConcatenate2": 2, "XNNConcatenate3": 3, "XNNConcatenate4": 4, "XNNConcatenate5": 5}

_HEADER = struct.Struct("<4s4sHIIIQ")  # 30 bytes
# Nodes the delegate inserted itself (layout transposes, converts) carry a sentinel, not a handle.
_NO_HANDLE = (0, 0xFFFF, 0xFFFFFFFF)
_MAX_NODES_DECODED = 1_000_000


@dataclass(slots=True)
class XnnNode:
    """One XNNPACK operation: its type, value ids in/out and the debug handle the compiler stored."""

    type: str
    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    debug_handle: int = 0  # 0 when the node has none (the delegate inserted it)


@dataclass(slots=True)
class XnnValue:
    """One XNNPACK tensor: datatype, dims, and whether it is constant / a graph input or output."""

    id: int
    datatype: str
    dims: tuple[int, ...] = ()
    constant_buffer_idx: int = 0
    external_id: int = 0xFFFFFFFF
    flags: int = 0
    quantized: bool = False


@dataclass(slots=True)
class XnnpackGraph:
    """What :func:`decode_xnnpack` learned about one payload."""

    version: str = ""
    identifier: str = ""
    has_header: bool = False
    flatbuffer_size: int = 0
    constant_data_size: int = 0
    nodes: list[XnnNode] = field(default_factory=list)
    values: list[XnnValue] = field(default_factory=list)
    num_externs: int = 0
    input_ids: tuple[int, ...] = ()
    output_ids: tuple[int, ...] = ()
    constant_entries: int = 0
    constant_bytes: int = 0  # sum of constant_data sizes stored inside the payload
    named_keys: list[str] = field(default_factory=list)  # constants kept in the program's named data
    #: where the constant region starts inside the payload, and each ``constant_data`` entry as
    #: ``(offset in that region, size, named_key or "")`` in entry order (index = constant_buffer_idx)
    constant_data_offset: int = 0
    constant_spans: list[tuple[int, int, str]] = field(default_factory=list)

    def op_names(self) -> list[str]:
        """The node types in execution order (``['XNNFullyConnected', 'XNNClamp', ...]``)."""
        return [n.type for n in self.nodes]

    def to_graph(self, name: str = "xnnpack") -> Graph:
        """The delegated subgraph as an etlens :class:`~etlens.model.Graph`.

        Graph inputs (``input_ids``) become ``input`` nodes, constant values that some node reads
        become ``param`` nodes, each XNode an ``op`` node with target ``xnnpack.<type>`` (category
        ``backend``) and its ``debug_handle``, and ``output_ids`` feed one ``output`` node.
        """
        values = {v.id: v for v in self.values}

        def meta(vid: int) -> list[TensorMeta]:
            v = values.get(vid)
            return [TensorMeta(tuple(v.dims), v.datatype)] if v is not None else []

        g = Graph(name, meta={"format": "xnnpack", "version": self.version})
        producer: dict[int, str] = {}
        for k, vid in enumerate(self.input_ids):
            node = g.add(Node(f"input_{k}", kind="input", outputs=meta(vid), attrs={"value_id": vid}))
            producer[vid] = node.name
        counts: dict[str, int] = {}
        for i, xn in enumerate(self.nodes):
            inputs: list[str] = []
            for vid in xn.inputs:
                src = producer.get(vid)
                if src is None:
                    v = values.get(vid)
                    if v is None or not v.constant_buffer_idx:
                        continue  # an unused optional slot (e.g. no bias) or an undeclared value
                    src = g.add(Node(f"const_{vid}", kind="param", outputs=meta(vid),
                                     attrs={"value_id": vid, "constant_buffer_idx": v.constant_buffer_idx})).name
                    producer[vid] = src
                inputs.append(src)
            short = xn.type[3:] if xn.type.startswith("XNN") else xn.type
            k = counts.get(short, 0)
            counts[short] = k + 1
            node = g.add(Node(short if k == 0 else f"{short}_{k}", kind="op", target=f"xnnpack.{short}",
                              inputs=inputs, outputs=[m for vid in xn.outputs for m in meta(vid)],
                              debug_handles=(xn.debug_handle,) if xn.debug_handle else (),
                              attrs={"index": i, "inputs": list(xn.inputs), "outputs": list(xn.outputs)}))
            for vid in xn.outputs:
                producer[vid] = node.name
        g.add(Node("output", kind="output", inputs=[producer[v] for v in self.output_ids if v in producer],
                   outputs=[m for v in self.output_ids for m in meta(v)], attrs={"value_ids": list(self.output_ids)}))
        return g

    def attrs(self) -> dict[str, Any]:
        """JSON-ready facts for ``Node.attrs['xnnpack']``."""
        return {
            "version": self.version,
            "identifier": self.identifier,
            "num_nodes": len(self.nodes),
            "num_values": len(self.values),
            "num_externs": self.num_externs,
            "input_ids": list(self.input_ids),
            "output_ids": list(self.output_ids),
            "flatbuffer_size": self.flatbuffer_size,
            "constant_data_size": self.constant_data_size,
            "constant_entries": self.constant_entries,
            "constant_bytes": self.constant_bytes,
            "named_constants": len(self.named_keys),
            "debug_handles": sorted({n.debug_handle for n in self.nodes if n.debug_handle}),
        }


    def summary(self, program: Any) -> dict[str, Any]:
        """What ``etlens info`` shows for this delegate beside its generic facts (ops, values, constants)."""
        out: dict[str, Any] = {"ops": self.op_names()}
        out["op_counts"] = dict(Counter(out["ops"]))
        out["num_values"] = len(self.values)
        out["constant_data_size"] = self.constant_data_size
        out["named_constants"] = len(self.named_keys)
        out["debug_handle_coverage"] = [sum(1 for n in self.nodes if n.debug_handle), len(self.nodes)]
        named = {nd.key: nd.segment_index for nd in program.named_data}
        nbytes = sum(program.segments[named[k]].size for k in self.named_keys
                     if k in named and named[k] < len(program.segments))
        if nbytes:
            out["named_constant_bytes"] = nbytes
        return out


def is_xnnpack_backend(backend_id: str) -> bool:
    return backend_id.lower().startswith("xnnpack")


def decode_xnnpack(payload: bytes | memoryview, name: str = "<xnnpack payload>") -> XnnpackGraph:
    """Decode the header and XNNGraph of an XNNPACK payload.

    Raises :class:`~etlens.errors.FormatError` (or ``TruncatedFileError``) naming ``name`` and the
    field when the payload is damaged.
    """
    n = len(payload)
    if n < 8:
        raise FormatError(f"{name}: XNNPACK payload is only {n} bytes; expected a header (XH00) or an "
                          "XNNGraph FlatBuffer; the file is damaged, re-export it")
    out = XnnpackGraph()
    magic = bytes(payload[4:8])
    if magic == b"XH00":
        if n < _HEADER.size:
            raise FormatError(f"{name}: XNNPACK header is cut short ({n} of {_HEADER.size} bytes); the file is "
                              "truncated, re-export it")
        _, _, hlen, fb_off, fb_size, const_off, const_size = _HEADER.unpack_from(payload, 0)
        if hlen < _HEADER.size or fb_off + fb_size > n or fb_size < 8:
            raise FormatError(f"{name}: XNNPACK header (XH00) places the graph at bytes {fb_off}..{fb_off + fb_size} "
                              f"(header length {hlen}) outside the {n}-byte payload; the file is damaged, re-export it")
        if const_off + const_size > n:
            raise FormatError(f"{name}: XNNPACK header places constant data at bytes {const_off}.."
                              f"{const_off + const_size}, outside the {n}-byte payload; re-export the model")
        out.has_header = True
        out.constant_data_size = const_size
        out.constant_data_offset = const_off
        start, end = fb_off, fb_off + fb_size
    else:
        start, end = 0, n
    fb = FlatBuffer(payload, name, start=start, end=end, what="XNNPACK graph")
    ident = fb.identifier
    if ident not in (b"XN00", xfb.FILE_IDENTIFIER):  # XN00: payloads of older ExecuTorch
        raise FormatError(f"{name}: not an XNNPACK payload (identifier {ident!r} at bytes {start + 4}-{start + 8}, "
                          "expected b'XN01' or b'XN00' or a b'XH00' header); the delegate id says XNNPACK but the "
                          "data is something else")
    out.identifier = ident.decode("ascii")
    out.flatbuffer_size = end - start
    root = fb.root("XNNGraph")
    G = xfb.XNNGraph
    out.version = root.text(G.version, "") or ""
    out.nodes = _decode_nodes(root)
    out.values = _decode_values(root)
    out.num_externs = root.get(G.num_externs)
    out.input_ids = root.items(G.input_ids)
    out.output_ids = root.items(G.output_ids)
    C = xfb.ConstantDataOffset
    for cd in root.children(G.constant_data):
        out.constant_entries += 1
        key = cd.text(C.named_key)
        out.constant_spans.append((cd.get(C.offset), cd.get(C.size), key or ""))
        if key:
            out.named_keys.append(key)
        else:
            out.constant_bytes += cd.get(C.size)
    return out


def _decode_nodes(root: Table) -> list[XnnNode]:
    nodes: list[XnnNode] = []
    for xn in root.children(xfb.XNNGraph.xnodes):
        tag, body = xn.variant(xfb.XNode.xnode_union)
        kind = XNODE_TYPES[tag] if tag < len(XNODE_TYPES) else f"XNNUnknown{tag}"
        ins: tuple[int, ...] = ()
        outs: tuple[int, ...] = ()
        layout = _LAYOUT.get(kind)
        if body is not None and layout is not None:
            in_fields = layout[0][:_CAT_INPUTS[kind]] if kind in _CAT_INPUTS else layout[0]
            # An absent id field means the default, 0, which is a real value id (FlatBuffers
            # omit fields equal to their default), so every field of the layout is read.
            ins = tuple(body.get(f) for f in in_fields)
            outs = tuple(body.get(f) for f in layout[1])
        handle = xn.get(xfb.XNode.debug_handle)
        nodes.append(XnnNode(kind, ins, outs, 0 if handle in _NO_HANDLE else handle))
        if len(nodes) > _MAX_NODES_DECODED:
            break
    return nodes


def _decode_values(root: Table) -> list[XnnValue]:
    values: list[XnnValue] = []
    V = xfb.XNNTensorValue
    for xv in root.children(xfb.XNNGraph.xvalues):
        tag, body = xv.variant(xfb.XValue.xvalue_union)
        quantized = tag == xfb.XValueUnion.XNNQuantizedTensorValue
        if quantized and body is not None:
            body = body.child(xfb.XNNQuantizedTensorValue.tensor_value)
        if body is None:
            continue
        datatype = body.get(V.datatype)
        values.append(XnnValue(
            id=body.get(V.id_out),
            datatype=XNNPACK_DATATYPES.get(datatype, f"dtype{datatype}"),
            dims=body.items(V.dims),
            constant_buffer_idx=body.get(V.constant_buffer_idx),
            external_id=body.get(V.external_id),
            flags=body.get(V.flags),
            quantized=quantized,
        ))
    return values


def decode(payload: memoryview, *, name: str, program: Any = None) -> XnnpackGraph:
    """The ``payload`` hook (etlens.backends.ROLES): the registry's readers call it for every XNNPACK delegate."""
    return decode_xnnpack(payload, name=name)
