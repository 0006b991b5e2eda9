"""Numerics inside the Ethos-U subgraph without hardware: the delegated TOSA graph in the TOSA reference model.

The Arm backend lowers each Ethos-U partition to a TOSA graph before Vela compiles it; the build
keeps that graph beside the artifacts (``<stem>.ethosu<k>.tosa``, see :mod:`.build`).
TOSA's reference model (``tosa_reference_model`` from the ``tosa-tools`` wheel) runs it bit-exactly
as the TOSA specification defines the integer arithmetic the NPU implements, and with
``--dump_intermediates 1`` prints every tensor it computes. :func:`tosa_inside_values` then, per
ATen node of each partition:

1. takes the last int8 tensor the node's TOSA operators write (``tosa_rescale_default_1`` for a
   convolution: TRANSPOSE -> CONV2D (int32) -> RESCALE (int8));
2. finds the node's reference: the edge program (the ETRecord's, quantize/dequantize included) run in
   PyTorch on the same inputs, read at the ``quantize_per_tensor`` that quantizes the node's output
   (through a fused activation such as ``relu``), i.e. the int8 code pt2e simulated;
3. compares the two in int8 steps (LSB) and, dequantized with that quantize's scale and zero point,
   in real units (MSE, max abs, SNR); NHWC tensors are transposed to PyTorch's NCHW first;
4. with the float model (``float_program``, the export before pt2e), also compares the dequantized
   TOSA value with the float value of the node the operator came from (its export-time name, the
   oldest ``from_node`` ancestor): the SNR against float shows quantization error (saturation, an
   outlier-stretched scale) that the pt2e simulation shares with the NPU.

Each partition runs on the reference's own inputs (the values the edge program computes for the
partition's inputs), so a fault shows at the first operator that has it, not downstream of another
partition. Rows more than ``threshold_lsb`` int8 steps from the pt2e reference, or below
``snr_floor_db`` against float, are flagged; ``first_flagged`` names the first in graph order —
where an int8 fault inside the NPU subgraph starts.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from etlens.errors import EtlensError, MissingDependencyError

__all__ = ["TosaRow", "TosaInsideResult", "tosa_inside_values", "run_tosa_reference", "parse_dump",
           "tosa_graph_io"]

_NAME = re.compile(r"^Name: (\S+) DType=(\S+) isValid=\d+ Rank=(\d+) Shape=\[([^\]]*)\]")
_NUM = re.compile(r"-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)")
_DATA = re.compile(r"^[\s\[\]0-9eE+.,naif-]*$")  # value lines: brackets, numbers (inf, nan), blanks
_INT_TYPES = {"INT8": "int8", "INT16": "int16", "INT32": "int32", "INT4": "int8", "BOOL": "bool", "INT48": "int64"}
_QUANT = ("quantize_per_tensor",)
_MOVES = ("view", "reshape", "permute", "transpose", "squeeze", "unsqueeze", "expand", "clone", "slice", "split",
          "select", "cat", "alias", "_to_copy", "dim_order")
_PASS_THROUGH = ("relu", "hardtanh", "clamp", "view", "reshape", "squeeze", "unsqueeze", "permute", "flatten")


def _tool() -> str:
    exe = shutil.which("tosa_reference_model") or os.path.join(os.path.dirname(sys.executable),
                                                               "tosa_reference_model")
    if not os.path.exists(exe):
        raise MissingDependencyError("the TOSA reference model (tosa_reference_model) is not installed: "
                                     "pip install --no-deps tosa-tools==2026.5.0 (scripts/setup.sh does)")
    return exe


def parse_dump(text: str) -> dict[str, Any]:
    """``{tensor name: numpy array}`` from the reference model's ``--dump_intermediates 1`` output."""
    import numpy as np

    out: dict[str, Any] = {}
    name = dtype = None
    shape: list[int] = []
    buf: list[str] = []

    def flush() -> None:
        if name is None or dtype not in _INT_TYPES and dtype not in ("FP32", "FP16", "BF16"):
            return
        vals = [float(v) for v in _NUM.findall(" ".join(buf))]
        n = int(np.prod(shape)) if shape else 1
        if len(vals) < n:
            return
        arr = np.array(vals[:n], dtype="float64").reshape(shape)
        out[name] = arr.astype(_INT_TYPES[dtype]) if dtype in _INT_TYPES else arr.astype("float32")

    for line in text.splitlines():
        m = _NAME.match(line)
        if m:
            flush()
            name, dtype = m.group(1), m.group(2)
            shape = [int(x) for x in m.group(4).replace(" ", "").split(",") if x]
            buf = []
        elif name is not None and _DATA.match(line):
            buf.append(line)
        elif name is not None and line.strip():
            flush()
            name = None
    flush()
    return out


def tosa_graph_io(tosa_path: str) -> tuple[list[tuple[str, tuple[int, ...]]], list[str]]:
    """``([(input name, shape)], [output names])`` of a serialized TOSA graph (via the tosa-tools wheel)."""
    try:
        from tosa.TosaGraph import TosaGraph
    except ImportError as exc:
        raise MissingDependencyError("reading a TOSA graph needs the tosa-tools wheel: pip install --no-deps "
                                     "tosa-tools==2026.5.0") from exc
    with open(tosa_path, "rb") as f:
        buf = f.read()
    try:
        block = TosaGraph.GetRootAsTosaGraph(buf, 0).Regions(0).Blocks(0)
        tensors = {}
        for i in range(block.TensorsLength()):
            t = block.Tensors(i)
            tensors[t.Name().decode()] = tuple(t.Shape(j) for j in range(t.ShapeLength()))
        ins = [block.Inputs(i).decode() for i in range(block.InputsLength())]
        outs = [block.Outputs(i).decode() for i in range(block.OutputsLength())]
    except Exception as exc:  # a damaged flatbuffer raises anything from struct to IndexError
        raise EtlensError(f"{tosa_path}: not a readable TOSA graph ({type(exc).__name__}: {exc}); rebuild it") from exc
    return [(n, tensors.get(n, ())) for n in ins], outs


def tosa_graph_ops(tosa_path: str) -> tuple[dict[str, tuple[int, ...]], list[tuple[str, list[str], list[str], tuple]]]:
    """``({tensor: shape}, [(op name, inputs, outputs, TRANSPOSE perms or ())]`` of a serialized TOSA graph."""
    try:
        from tosa.Op import Op
        from tosa.TosaGraph import TosaGraph
        from tosa.TransposeAttribute import TransposeAttribute
    except ImportError as exc:
        raise MissingDependencyError("reading a TOSA graph needs the tosa-tools wheel: pip install --no-deps "
                                     "tosa-tools==2026.5.0") from exc
    names = {v: k for k, v in vars(Op).items() if isinstance(v, int) and not k.startswith("_")}
    with open(tosa_path, "rb") as f:
        buf = f.read()
    try:
        block = TosaGraph.GetRootAsTosaGraph(buf, 0).Regions(0).Blocks(0)
        shapes = {}
        for i in range(block.TensorsLength()):
            t = block.Tensors(i)
            shapes[t.Name().decode()] = tuple(t.Shape(j) for j in range(t.ShapeLength()))
        ops = []
        for i in range(block.OperatorsLength()):
            o = block.Operators(i)
            name = names.get(o.Op(), str(o.Op()))
            perms: tuple = ()
            if name == "TRANSPOSE" and o.Attribute() is not None:
                attr = TransposeAttribute()
                tab = o.Attribute()
                attr.Init(tab.Bytes, tab.Pos)
                perms = tuple(int(attr.Perms(j)) for j in range(attr.PermsLength()))
            ops.append((name, [o.Inputs(j).decode() for j in range(o.InputsLength())],
                        [o.Outputs(j).decode() for j in range(o.OutputsLength())], perms))
    except Exception as exc:  # a damaged flatbuffer raises anything from struct to IndexError
        raise EtlensError(f"{tosa_path}: not a readable TOSA graph ({type(exc).__name__}: {exc}); rebuild it") from exc
    return shapes, ops


#: TOSA operators whose output keeps the dim order of their (first activation) input
_LAYOUT_KEEPING = ("RESCALE", "CLAMP", "CONV2D", "DEPTHWISE_CONV2D", "AVG_POOL2D", "MAX_POOL2D", "ADD", "SUB", "MUL",
                   "MAXIMUM", "MINIMUM", "TABLE", "SIGMOID", "TANH", "ERF", "EXP", "LOG", "RECIPROCAL", "RSQRT",
                   "ABS", "NEGATE", "CAST", "IDENTITY", "PAD", "SLICE", "TILE", "SELECT", "CONCAT", "REDUCE_SUM",
                   "REDUCE_MAX", "REDUCE_MIN", "ARITHMETIC_RIGHT_SHIFT", "TRANSPOSE_CONV2D", "RESIZE")


def tosa_layouts(tosa_path: str, input_orders: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """``{TOSA tensor: dim order}`` from the facts, never from shapes: the dim order of a tensor is the
    permutation ``p`` with ``tosa_value == logical_value.transpose(p)``, where *logical* is the edge
    program's (PyTorch's) order of the node the tensor computes.

    It starts at the graph inputs (``input_orders``: each one's dim order in the edge program, its
    ``dim_order()``: the delegate receives the tensor as it lies in memory) and follows the operators:
    a ``TRANSPOSE`` with ``perms`` gives ``order[perms]``; an operator that keeps the layout (convolutions
    and pools are NHWC in TOSA and so is what feeds them, elementwise ops, ``RESCALE`` …) passes its
    input's order on; anything else (``RESHAPE``, ``MATMUL``, a rank change) leaves the order unknown.
    """
    shapes, ops = tosa_graph_ops(tosa_path)
    order: dict[str, tuple[int, ...]] = {k: tuple(v) for k, v in input_orders.items()}
    for name, ins, outs, perms in ops:
        src = next((order[i] for i in ins if i in order), None)
        if src is None:
            continue
        if name == "TRANSPOSE" and perms and len(perms) == len(src):
            out = tuple(src[p] for p in perms)
        elif name in _LAYOUT_KEEPING:
            out = src
        else:
            continue
        for o in outs:
            if len(shapes.get(o, out)) == len(out):
                order.setdefault(o, out)
    return order


def _to_logical(arr: Any, order: tuple[int, ...] | None, ref_shape: tuple[int, ...]) -> Any:
    """``arr`` (a TOSA tensor) in the edge program's dim order: by its known ``order``; without one only when
    no transpose is in question (same shape, and no other dim order gives that shape), else None."""
    import numpy as np

    if order is not None and len(order) == arr.ndim and arr.ndim == len(ref_shape):
        out = np.transpose(arr, np.argsort(order))
        return out if tuple(out.shape) == tuple(ref_shape) else None
    if tuple(arr.shape) == tuple(ref_shape):
        if arr.ndim == 4 and len(set(ref_shape[1:])) < 3:
            return None  # square: NCHW and NHWC look alike, and no fact says which this is
        return arr
    return _align(arr, ref_shape)


def run_tosa_reference(tosa_path: str, inputs: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    """Run ``tosa_path`` in the reference model (a child process, :func:`etlens.builder.worker.run_tool`) on
    ``{input name: int array}``; every tensor it computed, by name."""
    import numpy as np

    from etlens.builder.worker import run_tool

    _, outs = tosa_graph_io(tosa_path)
    with tempfile.TemporaryDirectory(prefix="etlens-tosa-") as tmp:
        files = []
        for k, (name, arr) in enumerate(inputs.items()):
            p = os.path.join(tmp, f"in{k}.npy")
            np.save(p, np.ascontiguousarray(arr))
            files.append((name, p))
        cmd = [_tool(), "--tosa_file", tosa_path, "--ifm_name", ",".join(n for n, _ in files),
               "--ifm_file", ",".join(p for _, p in files), "--ofm_name", ",".join(outs),
               "--ofm_file", ",".join(f"out{k}.npy" for k in range(len(outs))), "--output_dir", tmp,
               "--dump_intermediates", "1"]
        proc = run_tool(cmd, timeout=timeout, what=f"{tosa_path}: the TOSA reference model")
        if proc.returncode != 0:
            raise EtlensError(f"{tosa_path}: the TOSA reference model failed (exit {proc.returncode}): "
                              f"{(proc.stderr or proc.stdout)[-600:]}")
        values = parse_dump(proc.stdout + "\n" + proc.stderr)  # the dump goes to either, by version
        for k, name in enumerate(outs):
            p = os.path.join(tmp, f"out{k}.npy")
            if os.path.exists(p):
                values[name] = np.load(p)
    return values


@dataclass
class TosaRow:
    """One ATen node of an Ethos-U partition: its TOSA int8 value against the pt2e reference."""

    partition: int
    node: str
    module_path: str
    tosa_tensor: str
    tosa_op: str
    shape: tuple[int, ...]
    scale: float
    zero_point: int
    max_abs_lsb: int
    mismatch_share: float      # share of elements more than 1 LSB apart
    mse: float
    max_abs: float
    snr_db: float
    flagged: bool = False
    float_node: str | None = None     # the float model's node (export-time name) compared with, if any
    float_snr_db: float | None = None
    float_max_abs: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "node": self.node, "module_path": self.module_path,
                "tosa_tensor": self.tosa_tensor, "tosa_op": self.tosa_op, "shape": list(self.shape),
                "scale": self.scale, "zero_point": self.zero_point, "max_abs_lsb": self.max_abs_lsb,
                "mismatch_share": self.mismatch_share, "MSE": self.mse, "max_abs": self.max_abs,
                "SNR": None if math.isinf(self.snr_db) else self.snr_db, "flagged": self.flagged,
                "float_node": self.float_node,
                "float_SNR": None if self.float_snr_db is None or math.isinf(self.float_snr_db) else self.float_snr_db,
                "float_max_abs": self.float_max_abs}


@dataclass
class TosaInsideResult:
    rows: list[TosaRow] = field(default_factory=list)
    threshold_lsb: int = 2
    notes: list[str] = field(default_factory=list)
    snr_floor_db: float = 10.0

    @property
    def first_flagged(self) -> TosaRow | None:
        return next((r for r in self.rows if r.flagged), None)

    def to_dict(self) -> dict[str, Any]:
        first = self.first_flagged
        return {"backend": "EthosUBackend", "engine": "TOSA reference model", "threshold_lsb": self.threshold_lsb,
                "snr_floor_db": self.snr_floor_db,
                "rows": [r.to_json() for r in self.rows], "first_flagged": first.node if first else None,
                "notes": list(self.notes)}

    def to_text(self) -> str:
        lines = [f"Per-op values inside the Ethos-U subgraph (TOSA reference model vs the pt2e reference; flagged "
                 f"above {self.threshold_lsb} int8 steps)"]
        lines.append(f"  {'node':<36} {'module':<20} {'TOSA tensor':<32} {'max LSB':>7} {'>1 LSB':>7} "
                     f"{'max abs':>9} {'SNR dB':>7} {'vs float':>8}")
        for r in self.rows:
            snr = "inf" if math.isinf(r.snr_db) else f"{r.snr_db:.1f}"
            lines.append(f"{'!' if r.flagged else ' '} {r.node[:36]:<36} {r.module_path[:20]:<20} "
                         f"{r.tosa_tensor[:32]:<32} {r.max_abs_lsb:>7} {100 * r.mismatch_share:>6.1f}% "
                         f"{r.max_abs:>9.4g} {snr:>7} "
                         f"{'-' if r.float_snr_db is None else format(r.float_snr_db, '.1f'):>8}")
        first = self.first_flagged
        lines.append(f"first flagged: {first.node} ({first.module_path or 'top level'}), TOSA {first.tosa_op} "
                     f"{first.tosa_tensor}" if first else "no operator crosses the threshold")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _reference(ep: Any, inputs: tuple) -> dict[str, Any]:
    import torch

    gm = ep.module()
    values: dict[str, Any] = {}

    class _Capture(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            if isinstance(out, torch.Tensor):
                values[n.name] = out.detach()
            return out

    with torch.no_grad():
        _Capture(gm).run(*inputs)
    return values


def _quantize_after(node: Any) -> tuple[Any, Any]:
    """``(quantize, producer)``: the quantize_per_tensor of ``node``'s output, reached through fused
    activations / views, and the node whose value it quantizes (``node`` itself or the last of those)."""
    seen = 0
    cur = node
    while cur is not None and seen < 6:
        users = list(cur.users)
        q = [u for u in users if any(k in str(u.target) for k in _QUANT)]
        if q:
            return q[0], cur
        nxt = [u for u in users if any(k in str(u.target) for k in _PASS_THROUGH)]
        cur = nxt[0] if len(nxt) == 1 else None
        seen += 1
    return None, None


def _export_name(node: Any) -> str | None:
    """The export-time ancestor of an fx node (the root of its ``from_node`` chain)."""
    src = (node.meta.get("from_node") or [None])[-1]
    name = None
    while src is not None:
        name = getattr(src, "name", None)
        chain = getattr(src, "from_node", None) or []
        src = chain[-1] if chain else None
    return name


def _align(arr: Any, ref_shape: tuple[int, ...]) -> Any:
    if tuple(arr.shape) == tuple(ref_shape):
        return arr
    if arr.ndim == 4 and len(ref_shape) == 4 and arr.transpose(0, 3, 1, 2).shape == tuple(ref_shape):
        return arr.transpose(0, 3, 1, 2)
    if arr.size == math.prod(ref_shape):
        return arr.reshape(ref_shape)
    return None


def _dim_order(node: Any, value: Any) -> tuple[int, ...]:
    """The edge program's dim order of ``node``'s value (its ``val``'s ``dim_order()``, else the value's own)."""
    for v in ((node.meta.get("val") if node is not None else None), value):
        try:
            return tuple(int(d) for d in v.dim_order())
        except Exception:  # noqa: BLE001 - no tensor / no dim order: try the next source
            continue
    return tuple(range(getattr(value, "ndim", 0)))


def _snr(err: Any, ref: Any) -> float:
    import numpy as np

    mse = float(np.mean(err ** 2))
    sig = float(np.mean(ref ** 2))
    return math.inf if mse == 0 else (10 * math.log10(sig / mse) if sig > 0 else -math.inf)


def tosa_inside_values(etrecord: str, sidecar: str | None = None, *, inputs: tuple | None = None,
                       threshold_lsb: int = 2, tosa_override: dict[int, str] | None = None,
                       float_program: Any = None, snr_floor_db: float = 10.0) -> TosaInsideResult:
    """Per-ATen-node int8 values of every Ethos-U partition, TOSA reference model vs the pt2e reference.

    ``inputs``: the model inputs (default: the ETRecord's representative inputs, else the edge
    program's example inputs). ``tosa_override``: ``{partition: path}`` to run another TOSA file (a
    planted fault in a test).
    """
    import numpy as np

    from etlens.readers.etrecord import read as read_etrecord
    from .vela import find_sidecar, read_sidecar

    path = sidecar or find_sidecar(etrecord, required=True)
    assert path is not None
    sc = read_sidecar(path)
    rec = read_etrecord(etrecord)
    stage = next((s for s in rec.stages if s.startswith("edge_dialect_exported_program")), None)
    if stage is None:
        raise EtlensError(f"{etrecord}: no edge program in this ETRecord, so there is no reference to compare with")
    ep = rec.load_exported_program(stage)
    if inputs is None:
        reps = rec.representative_inputs
        inputs = tuple(reps[0]) if reps else tuple(ep.example_inputs[0])
    ref = _reference(ep, inputs)
    # the float model (before pt2e), keyed by its export-time node names (the TOSA ops' oldest origin)
    fref = _reference(float_program, inputs) if float_program is not None else {}
    nodes = {n.name: n for n in ep.graph.nodes}
    by_handle: dict[int, list[Any]] = {}
    for n in ep.graph.nodes:
        h = n.meta.get("debug_handle")
        for x in (h if isinstance(h, (tuple, list)) else [h]):
            if isinstance(x, int):
                by_handle.setdefault(x, []).append(n)
    from .mapping import QDQ_OPS as _QDQ

    last_of_export: dict[str, Any] = {}
    for n in ep.graph.nodes:
        if n.op == "call_function" and not any(q in str(n.target) for q in _QDQ):
            en = _export_name(n)
            if en:
                last_of_export[en] = n

    result = TosaInsideResult(threshold_lsb=threshold_lsb, snr_floor_db=snr_floor_db)
    for part in sc.partitions:
        tosa = (tosa_override or {}).get(part.index) or part.tosa_file
        if not tosa or not os.path.exists(tosa):
            result.notes.append(f"partition {part.index}: no TOSA graph beside the sidecar ({tosa}); rebuild to "
                                "keep it")
            continue
        ins, _ = tosa_graph_io(tosa)
        feed, orders = {}, {}
        for name, shape in ins:
            if name not in ref:
                raise EtlensError(f"{tosa}: TOSA input {name!r} is not a node of the edge program, so the reference "
                                  "cannot feed it")
            arr = ref[name].numpy()
            dim_order = _dim_order(nodes.get(name), ref[name])
            fed = np.transpose(arr, dim_order) if len(dim_order) == arr.ndim else arr
            if shape and tuple(fed.shape) != tuple(shape):
                raise EtlensError(f"{tosa}: TOSA input {name!r} has shape {tuple(shape)}, the edge program's value in "
                                  f"its dim order {dim_order} {tuple(fed.shape)}; not the program of this sidecar?")
            feed[name], orders[name] = np.ascontiguousarray(fed), dim_order
        values = run_tosa_reference(tosa, feed)
        layouts = tosa_layouts(tosa, orders)
        # One comparison per debug-handle group (an ATen op and what it decomposed into): the group's last
        # compute node in graph order against the last int8 tensor the group's TOSA ops write. Inside a
        # decomposition (layer norm, softmax) the TOSA tensors do not map 1:1 to the edge nodes, so only the
        # group's output is compared; pure data movement (views, permutes) is exact and not compared.
        group_tensor: dict[int, tuple[str, str]] = {}
        group_order: list[int] = []
        for op in part.tosa_ops:
            t = str(op.get("tensor"))
            v = values.get(t)
            if v is None or v.dtype != np.int8:
                continue
            h = op.get("debug_handle")
            hs = [x for x in (h if isinstance(h, list) else [h]) if isinstance(x, int)]
            if len(hs) != 1:
                continue
            if hs[0] not in group_tensor:
                group_order.append(hs[0])
            group_tensor[hs[0]] = (t, str(op.get("op")))
        last: dict[str, tuple[str, str]] = {}
        order: list[str] = []
        for h in group_order:
            cands = [n for n in by_handle.get(h, []) if n.op == "call_function"
                     and not any(q in str(n.target) for q in _QDQ) and not any(k in str(n.target) for k in _MOVES)]
            if not cands:
                continue
            node = cands[-1]
            if node.name not in last:
                order.append(node.name)
            last[node.name] = group_tensor[h]
        for name in order:
            t, op_name = last[name]
            q, producer = _quantize_after(nodes[name])
            # compare with float only where the producer ends its export-time node (``mean`` decomposes into
            # sum + mul: the mul's value is the mean's, the sum's has no float counterpart)
            fname = _export_name(producer) if producer is not None else None
            if fname is not None and last_of_export.get(fname) is not producer:
                fname = None
            if q is None or q.name not in ref:
                result.notes.append(f"{name}: no quantize of its output in the edge program; not compared")
                continue
            scale, zp = float(q.args[1]), int(q.args[2])
            want = ref[q.name].numpy().astype(np.int64)
            got = _to_logical(values[t].astype(np.int64), layouts.get(t), tuple(want.shape))
            if got is None:
                result.notes.append(f"{name}: TOSA {t} has shape {values[t].shape} in dim order "
                                    f"{layouts.get(t, 'unknown')}, the reference {tuple(want.shape)}; not compared")
                continue
            d = np.abs(got - want)
            real_got, real_want = (got - zp) * scale, (want - zp) * scale
            err = real_got - real_want
            mse = float(np.mean(err ** 2))
            snr = _snr(err, real_want)
            module = ""
            stack = nodes[name].meta.get("nn_module_stack") or {}
            if isinstance(stack, dict) and stack:
                last_entry = list(stack.values())[-1]
                module = str(last_entry[0]) if isinstance(last_entry, (list, tuple)) else ""
            row = TosaRow(part.index, name, module, t, op_name, tuple(want.shape), scale, zp, int(d.max()),
                          float(np.mean(d > 1)), mse, float(np.abs(err).max()), snr)
            if fname and fname in fref:
                fv = fref[fname].float().numpy()
                fgot = _align(real_got, tuple(fv.shape)) if real_got.shape != fv.shape else real_got
                if fgot is not None:
                    row.float_node = fname
                    row.float_snr_db = _snr(fgot - fv, fv)
                    row.float_max_abs = float(np.abs(fgot - fv).max())
            row.flagged = row.max_abs_lsb > threshold_lsb or (row.float_snr_db is not None
                                                              and row.float_snr_db < snr_floor_db)
            result.rows.append(row)
    return result
