"""XNNPACK plug-in: which XNode(s) of the payload each runtime operator event ran.

XNNPACK logs one event per *runtime operator*, named by the operator and its datatype, with a
per-kind counter: ``Convolution (NHWC, F32) IGEMM #1``, ``Fully Connected (NC, QS8, QC8W) GEMM #2``,
``Transpose (ND, X32) #1``, ``Convert (NC) #1``. The payload (decoded by
:mod:`.payload`) lists the *XNodes* in execution order, each with a ``debug_handle``.
When XNNPACK builds its runtime from the XNodes it keeps their order but

* fuses some nodes into their producer (a ``Clamp`` after a convolution becomes the convolution's
  output range), so some XNodes have no event;
* rewrites some kinds (a 1x1 ``Conv2d`` runs as ``Fully Connected``, ``GlobalAvgPooling2d`` as
  ``Mean``, ``StaticTranspose`` as ``Transpose``);
* may run one XNode as several operators (a concatenation as one ``Copy`` per input).

So the events are aligned to the XNodes with a monotone alignment (dynamic programming, like an
edit distance): matching an event to a node of a compatible kind costs nothing (a datatype
mismatch or a kind alias a little), leaving a fusable node without event costs little, leaving
any other node or an event unmatched costs much. A matched event is *ambiguous* when another node
between its neighbours' matches would have fitted as well. Nodes the delegate inserted itself
(layout transposes, with no debug handle) are charged to the node they feed.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from etlens.analysis.attribution.types import EventMatch

__all__ = ["XnnpackAttributor", "parse_event_name", "event_kind_matches"]


#: runtime operator name (lower case, no spaces) -> XNode types (without ``XNN``) it can run
_ALIASES: dict[str, tuple[str, ...]] = {
    "convolution": ("Conv2d", "DepthwiseConv2d"),
    "deconvolution": ("ConvTranspose2d",),
    "fullyconnected": ("FullyConnected",),
    "dynamicfullyconnected": ("FullyConnected",),
    "transpose": ("StaticTranspose",),
    "mean": ("GlobalAvgPooling2d",),
    "sum": ("GlobalAvgPooling2d",),
    "globalaveragepooling": ("GlobalAvgPooling2d",),
    "sine": ("Sin",),
    "cosine": ("Cos",),
    "copy": ("Copy", "StaticReshape", "Concatenate2", "Concatenate3", "Concatenate4", "Concatenate5",
             "StaticSlice"),
    "concatenate": ("Concatenate2", "Concatenate3", "Concatenate4", "Concatenate5"),
    "staticreshape": ("StaticReshape",),
    "constantpad": ("StaticConstantPad",),
    "slice": ("StaticSlice",),
    "resizebilinear": ("StaticResizeBilinear2D",),
    "maxpooling": ("MaxPooling2d",),
    "averagepooling": ("AvgPooling2d",),
    "argmaxpooling": ("ArgMaxPooling2d",),
    "divide": ("Div",),
    "clamp": ("Clamp",),
    "hardswish": ("Hardswish",),
    "batchmatrixmultiply": ("BatchMatrixMultiply",),
    "convert": ("Convert",),
    "quantize": ("Convert",),
    "dequantize": ("Convert",),
    "scaleddotproductattention": ("ScaledDotProductAttention",),
    "squareroot": ("SquareRoot",),
    "reciprocalsquareroot": ("ReciprocalSquareRoot",),
    "exp": ("Exp",),
    "log": ("Log",),
}
#: kinds XNNPACK runs as another operator (a 1x1 convolution as a GEMM, a matmul with constant weights)
_REWRITES: dict[str, tuple[str, ...]] = {
    "fullyconnected": ("Conv2d", "BatchMatrixMultiply"),
    "convolution": ("FullyConnected",),
    "copy": ("StaticTranspose",),
    "square": ("Multiply",),          # x * x
    "clamp": ("Maximum", "Minimum"),
    # quantized unary ops run through a lookup table XNNPACK names "Invalid Unary Op"
    "invalidunaryop": ("Gelu", "Tanh", "Sigmoid", "ELU", "Exp", "Log", "Abs", "Negate", "Square", "SquareRoot",
                       "ReciprocalSquareRoot", "Hardswish", "LeakyReLU", "Sin", "Cos", "Floor", "Ceiling", "Clamp"),
}
# nodes XNNPACK folds into their producer when it builds the runtime (no event of their own)
# (a Convert between quantized ops and a unary op is folded into the quantized unary op)
_FUSABLE = {"Clamp": 0.1, "Convert": 0.5}
# nodes it may elide (copies and reshapes of views)
_ELIDABLE = {"StaticReshape": 1.0, "Copy": 1.0, "StaticTranspose": 2.0}
_SKIP_NODE = 4.0       # a node that ran no operator, for no known reason
_SKIP_EVENT = 6.0      # an event no node explains (stays unattributed)
_ALIAS_COST = 0.3      # kind agrees only through a known rewrite
_DTYPE_COST = 0.5      # the event's datatype tag disagrees with the node's output
_EXTRA_COST = 0.6      # a second (third …) operator of one node
_POSITIONAL = 4.5      # kinds disagree, but the neighbours pin the position (reported as ambiguous)
_INF = float("inf")

_DTYPE_TAGS = {
    "F32": ("float32",), "F16": ("float16", "bfloat16"), "BF16": ("bfloat16",),
    "QS8": ("qint8", "qcint8", "qdint8", "qpint8"), "QU8": ("quint8",), "QC8": ("qint8", "qcint8"),
    "QD8": ("qdint8", "qint8", "float32"), "X32": ("float32", "int32", "qint32", "qcint32"),
    "X16": ("float16", "bfloat16"), "X8": ("qint8", "quint8", "qcint8", "qdint8"),
}


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def parse_event_name(name: str) -> tuple[str, tuple[str, ...], str]:
    """``(operator, tags, variant)`` of an XNNPACK event name:
    ``'Convolution (NHWC, F32) IGEMM #1'`` → ``('Convolution', ('NHWC', 'F32'), 'IGEMM')``."""
    base = (name or "").split("#", 1)[0].strip()
    if "(" in base and ")" in base:
        op, rest = base.split("(", 1)
        tag_text, variant = rest.split(")", 1)
        tags = tuple(t.strip() for t in tag_text.split(",") if t.strip())
        return op.strip(), tags, variant.strip()
    return base, (), ""


def event_kind_matches(event_op: str, node_type: str) -> float:
    """Cost of running XNode ``node_type`` (``Conv2d`` or ``XNNConv2d``) as event operator
    ``event_op``: 0 same kind, :data:`_ALIAS_COST` through a known rewrite, inf incompatible."""
    t = node_type[3:] if node_type.startswith("XNN") else node_type
    e = _norm(event_op)
    n = _norm(t)
    if e == n or e == _norm(re.sub(r"^Static", "", t)) or e == re.sub(r"\d+d$", "", n):
        return 0.0
    if t in _ALIASES.get(e, ()):
        return 0.0
    if t in _REWRITES.get(e, ()):
        return _ALIAS_COST
    return _INF


def _dtype_cost(tags: tuple[str, ...], node_dtype: str | None) -> float:
    if not node_dtype:
        return 0.0
    known = [t for t in tags if t in _DTYPE_TAGS]
    if not known:
        return 0.0
    return 0.0 if any(node_dtype in _DTYPE_TAGS[t] for t in known) else _DTYPE_COST


class XnnpackAttributor:
    """The built-in attributor for ``XnnpackBackend`` delegates (see the module docstring)."""

    def match(self, event_names: Sequence[str], delegate: Any) -> list[EventMatch]:
        graph = getattr(delegate, "decoded", None) if delegate is not None else None
        if graph is None or not graph.nodes:
            why = ("no .pte given: pass the program to look inside its delegates" if delegate is None
                   else f"the XNNPACK payload could not be decoded ({getattr(delegate, 'decode_error', '')})")
            return [EventMatch(n, note=why) for n in event_names]
        return align(list(event_names), graph)


def _node_label(i: int, t: str) -> str:
    return f"xnnpack.{t[3:] if t.startswith('XNN') else t}#{i}"


def _charge_handles(graph: Any) -> list[int]:
    """The debug handle each XNode's time is charged to: its own, or for a node the delegate
    inserted (handle 0, e.g. a layout transpose) the handle of the node consuming its output,
    else of the node producing its input."""
    nodes = graph.nodes
    own = [n.debug_handle for n in nodes]
    consumers: dict[int, list[int]] = {}
    producer: dict[int, int] = {}
    for i, n in enumerate(nodes):
        for v in n.inputs:
            consumers.setdefault(v, []).append(i)
        for v in n.outputs:
            producer[v] = i
    out = list(own)
    for i, n in enumerate(nodes):
        if own[i]:
            continue
        seen = {i}
        frontier = [c for v in n.outputs for c in consumers.get(v, ())]
        while frontier and not out[i]:   # follow through other inserted nodes
            j = frontier.pop(0)
            if j in seen:
                continue
            seen.add(j)
            if own[j]:
                out[i] = own[j]
            else:
                frontier.extend(c for v in nodes[j].outputs for c in consumers.get(v, ()))
        if not out[i]:
            for v in n.inputs:
                p = producer.get(v)
                if p is not None and out[p]:   # producers come first: already charged
                    out[i] = out[p]
                    break
    return out


def align(events: list[str], graph: Any) -> list[EventMatch]:
    """Align ``events`` (runtime operator names, in order) to ``graph.nodes`` (see module docstring)."""
    nodes = graph.nodes
    dtypes = {v.id: v.datatype for v in graph.values}
    ntypes = [n.type for n in nodes]
    ndt = [dtypes.get(n.outputs[0]) if n.outputs else None for n in nodes]
    parsed = [parse_event_name(e) for e in events]
    m, k = len(events), len(nodes)

    # cost matrix through the few distinct (event kind, node kind) pairs
    ekeys = [(p[0], p[1]) for p in parsed]
    nkeys = list(zip(ntypes, ndt))
    pair: dict[tuple, float] = {}
    table: list[list[float]] = []
    for ek in ekeys:
        row = []
        for nk in nkeys:
            c = pair.get((ek, nk))
            if c is None:
                c = event_kind_matches(ek[0], nk[0])
                c = pair[(ek, nk)] = _POSITIONAL if c == _INF else c + _dtype_cost(ek[1], nk[1])
            row.append(c)
        table.append(row)

    def cost(i: int, j: int) -> float:
        return table[i][j]

    skips = [_FUSABLE.get(t[3:], _ELIDABLE.get(t[3:], _SKIP_NODE)) for t in ntypes]


    # F[i][j]: best cost having consumed i events and j nodes; back[i][j]: the move that got there
    F = [[_INF] * (k + 1) for _ in range(m + 1)]
    back = [[0] * (k + 1) for _ in range(m + 1)]   # 1 match, 2 skip node, 3 skip event, 4 extra event
    F[0][0] = 0.0
    for i in range(m + 1):
        Fi, Bi = F[i], back[i]
        Fp = F[i - 1] if i else Fi
        Bp = back[i - 1] if i else Bi
        Ti = table[i - 1] if i else ()
        for j in range(k + 1):
            best, mv = Fi[j], Bi[j]
            if i:
                if j:
                    c = Ti[j - 1]
                    v = Fp[j - 1] + c
                    if v < best:
                        best, mv = v, 1
                    if c < _POSITIONAL and (Bp[j] == 1 or Bp[j] == 4):
                        v = Fp[j] + c + _EXTRA_COST
                        if v < best:
                            best, mv = v, 4
                v = Fp[j] + _SKIP_EVENT
                if v < best:
                    best, mv = v, 3
            if j:
                v = Fi[j - 1] + skips[j - 1]
                if v < best:
                    best, mv = v, 2
            Fi[j], Bi[j] = best, mv
    # backtrack
    node_of = [-1] * m
    moves: list[tuple[int, int, int]] = []
    i, j = m, k
    while i or j:
        mv = back[i][j]
        moves.append((mv, i, j))
        if mv in (1,):
            node_of[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif mv == 4:
            node_of[i - 1] = j - 1
            i -= 1
        elif mv == 3:
            i -= 1
        else:
            j -= 1
    # skipped fusable nodes join the event of the node before them
    fused_into: dict[int, list[int]] = {}
    matched = sorted(set(j for j in node_of if j >= 0))
    matched_set = set(matched)
    last = -1
    skipped_other: list[int] = []
    for j in range(k):
        if j in matched_set:
            last = j
        elif ntypes[j][3:] in _FUSABLE and last >= 0:
            fused_into.setdefault(last, []).append(j)
        else:
            skipped_other.append(j)
    charge = _charge_handles(graph)
    out: list[EventMatch] = []
    for i, name in enumerate(events):
        j = node_of[i]
        if j < 0:
            out.append(EventMatch(name, note="no XNode of a compatible kind at this position"))
            continue
        group = [j] + fused_into.get(j, [])
        handles = tuple(dict.fromkeys(h for h in (charge[x] for x in group) if h))
        c = cost(i, j)
        quality, note = "exact", ""
        if not nodes[j].debug_handle:
            quality, note = "inserted", "a node the delegate inserted (no debug handle), charged to the node it feeds"
        elif c >= _POSITIONAL:
            quality, note = "ambiguous", f"kinds differ ({ntypes[j][3:]} vs {parsed[i][0]}); matched by position"
        elif c >= _DTYPE_COST:
            quality, note = "alias", f"datatype {ndt[j]} vs event tags {', '.join(parsed[i][1])}"
        elif c > 0:
            quality, note = "alias", f"{ntypes[j][3:]} runs as {parsed[i][0]}"
        # ambiguity: another node between the neighbouring events' nodes fits as well
        lo = max((node_of[x] for x in range(i) if node_of[x] >= 0), default=-1)
        hi = min((node_of[x] for x in range(i + 1, m) if node_of[x] >= 0), default=k)
        rivals = [x for x in range(lo + 1, hi) if x != j and x not in matched_set and cost(i, x) <= c
                  and c < _POSITIONAL]
        if rivals:
            quality = "ambiguous"
            note = (note + "; " if note else "") + "could also be " + ", ".join(
                _node_label(x, ntypes[x]) for x in rivals[:3])
        if not handles:
            quality, note = "unattributed", "the matched XNode carries no debug handle"
        out.append(EventMatch(name, handles=handles, backend_ops=tuple(_node_label(x, ntypes[x]) for x in group[:1]),
                              fused=tuple(_node_label(x, ntypes[x]) for x in group[1:]), quality=quality, note=note))
    return out
