"""Pair reference (AOT) outputs with runtime outputs by debug-handle sets, in near-linear time.

What is paired with what follows ExecuTorch's ``calculate_numeric_gap`` rule for rule, so the rows
are the same; only the algorithms differ (ExecuTorch compares every pair of handle sets, which is
quadratic: 18 s on a 1000-layer model).

1. **Runtime merge** (:func:`merge_runtime_handles`): runtime entries are visited in order; an entry
   absorbs every earlier (already merged) entry it shares a handle with. Merged sets stay disjoint,
   so an index ``handle -> merged set`` finds the overlapping sets in O(len(entry)) instead of a scan
   over all of them. The merged tuple's element order and which output survives (the one with the
   higher instruction id) are ExecuTorch's.
2. **Groups** (:func:`pair_outputs`): a reference entry and a runtime entry are connected when their
   handle sets intersect. The connected components of that bipartite graph come from a union-find
   over handles: for each handle shared by both sides, all entries holding it are united. Groups are
   visited in the order of their first reference entry (ExecuTorch's DFS order).
3. **Output choice** per group and runtime output index ``i``: the reference output of the handle at
   position ``-(i+1)`` of the runtime handle tuple, provided every reference handle of the group is in
   the runtime set; for a runtime event that logged several tensors (delegate inputs and outputs,
   ``native_layer_norm``'s three outputs) the tensor at the same position, or the one tensor whose
   shape (then dtype) matches the reference output.

Pairs that cannot be made are not errors: they are collected as :class:`Unpaired` records with a
reason code, which :func:`etlens.analysis.numerics.explain_unpaired` turns into sentences.

Example::

    merged = merge_runtime_handles({(1,): (0, [t1], 1), (1, 2): (3, [t2], 1)})
    # {(1, 2): (3, [t2], 1)}
    result = pair_outputs({(1,): a1, (2,): a2}, {h: (v[1], v[2]) for h, v in merged.items()})
    result.mapping   # {((1, 2), a2): ((1, 2), t2)}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .reasons import Reason

__all__ = ["merge_runtime_handles", "merge_handle_tuples", "pair_outputs", "PairResult", "PairInfo", "Unpaired",
           "HandleNameIndex", "UnionFind"]


def merge_handle_tuples(first: tuple, second: tuple) -> tuple:
    """``first``'s handles not in ``second`` (in order), then ``second``'s without repeats.

    ExecuTorch's order for a merged runtime handle: the earlier instruction's handles come first.
    Repeats inside ``first`` are kept (only the part coming from ``second`` is de-duplicated).
    """
    in_second = set(second)
    out = [h for h in first if h not in in_second]
    seen = set(out)
    for h in second:
        if h not in seen:
            out.append(h)
            seen.add(h)
    return tuple(out)


def merge_runtime_handles(entries: dict) -> dict:
    """Merge runtime entries whose handle tuples overlap, as ExecuTorch does, in near-linear time.

    Args:
        entries: ``{handle_tuple: (instruction_id, output, num_outputs)}`` in event order.

    Returns:
        ``{merged_handle_tuple: (instruction_id, output, num_outputs)}``. The surviving value of a
        merge is the overlapping entry with an instruction id >= the new entry's that comes last in
        the merged order, else the new entry's own (this is ExecuTorch's rule, including its quirk of
        comparing every overlapping entry against the *new* entry's instruction id).
    """
    merged: dict[tuple, Any] = {}
    seq: dict[tuple, int] = {}  # merged key -> insertion counter (dict iteration order)
    owner: dict[int, tuple] = {}  # handle -> the merged key holding it (merged keys are disjoint)
    counter = 0
    for key, value in entries.items():
        instruction_id = value[0]
        overlapping = {owner[h] for h in key if h in owner}
        curr, last = key, value
        if overlapping:
            for existing in sorted(overlapping, key=seq.__getitem__):
                existing_value = merged[existing]
                if existing_value[0] < instruction_id:
                    curr = merge_handle_tuples(existing, curr)
                else:
                    curr = merge_handle_tuples(curr, existing)
                    last = existing_value
            for existing in overlapping:
                del merged[existing]
                del seq[existing]
        merged[curr] = last
        seq[curr] = counter
        counter += 1
        for h in curr:
            owner[h] = curr
    return merged


class UnionFind:
    """Disjoint sets over ``0..n-1`` with path halving and union by size."""

    __slots__ = ("parent", "size")

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return ra


@dataclass
class Unpaired:
    """A reference entry or runtime entry that produced no row, and why (``reason`` is a code)."""

    side: str  # "reference" | "runtime"
    debug_handle: tuple
    reason: Reason
    detail: str = ""
    runtime_debug_handle: tuple | None = None


@dataclass
class PairInfo:
    """Where one mapping entry came from: its group and which reference handle's output was used."""

    group: int  # index of the connected group (in pairing order)
    output_index: int  # runtime output index i (the -(i+1)-th handle / tensor)
    aot_handle: tuple  # the single reference handle whose output is compared, e.g. (7,)
    aot_handles: tuple[tuple, ...]  # every reference handle in the group
    runtime_handle: tuple
    runtime_choice: str = ""  # how the runtime tensor was picked ("", "position", "shape", "shape+dtype", "last",
    # "delegate output map")


@dataclass
class PairResult:
    """Output of :func:`pair_outputs`: ExecuTorch's mapping plus what etlens keeps for explanations."""

    mapping: dict = field(default_factory=dict)  # {(aot_handle, aot_output): (runtime_handle, runtime_output)}
    info: list[PairInfo] = field(default_factory=list)  # parallel to mapping.items()
    unpaired: list[Unpaired] = field(default_factory=list)


def _is_seq(x: Any) -> bool:
    if isinstance(x, (list, tuple)):  # the usual answers first: the ABC check costs ~1 µs a call
        return True
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def _shape(x: Any):
    return tuple(x.shape) if hasattr(x, "shape") and hasattr(x, "dtype") else None


def _pick_by_shape(aot_out: Any, runtime_out: Sequence) -> tuple[Any, str]:
    """The runtime tensor with the reference output's shape (then dtype); else the last one."""
    want = _shape(aot_out)
    same_shape = [i for i, r in enumerate(runtime_out) if _shape(r) is not None and _shape(r) == want]
    if len(same_shape) == 1:
        return runtime_out[same_shape[0]], "shape"
    if len(same_shape) > 1:
        same_dtype = [i for i in same_shape if runtime_out[i].dtype == aot_out.dtype]
        if len(same_dtype) == 1:
            return runtime_out[same_dtype[0]], "shape+dtype"
    return runtime_out[-1], "last"


def _connected_groups(aot_keys: list[tuple], rt_keys: list[tuple]) -> list[list[int]]:
    """Entries that share a handle, grouped (union-find): AOT entries are ``0..n_aot-1``, runtime after.

    Members are in index order; groups are ordered by their smallest index (= first AOT entry).
    """
    n_aot = len(aot_keys)
    aot_by_h: dict[int, list[int]] = {}
    for i, key in enumerate(aot_keys):
        for h in set(key):
            aot_by_h.setdefault(h, []).append(i)
    rt_by_h: dict[int, list[int]] = {}
    for j, key in enumerate(rt_keys):
        for h in set(key):
            rt_by_h.setdefault(h, []).append(n_aot + j)
    uf = UnionFind(n_aot + len(rt_keys))
    for h, rt_nodes in rt_by_h.items():
        aot_nodes = aot_by_h.get(h)
        if not aot_nodes:
            continue
        first = rt_nodes[0]
        for x in aot_nodes:
            uf.union(first, x)
        for x in rt_nodes[1:]:
            uf.union(first, x)
    groups: dict[int, list[int]] = {}
    for x in range(n_aot + len(rt_keys)):
        groups.setdefault(uf.find(x), []).append(x)
    return list(groups.values())


def _unpairable_group(aot: list[tuple], rt: list[tuple]) -> list[Unpaired]:
    """Leftovers of a group that cannot pair: one side empty, or several runtime events (ambiguous)."""
    if not rt:
        return [Unpaired("reference", k, Reason.NO_RUNTIME_EVENT) for k in aot]
    if not aot:
        return [Unpaired("runtime", k, Reason.NO_REFERENCE_OUTPUT) for k in rt]
    # ExecuTorch raises here ("Expected only one runtime debug handle"); we report the group.
    detail = "reference handles overlap several separate runtime events: " + ", ".join(str(k) for k in rt)
    return ([Unpaired("reference", k, Reason.AMBIGUOUS, detail) for k in aot]
            + [Unpaired("runtime", k, Reason.AMBIGUOUS, detail) for k in rt])


def _multi_output_value(aot_out: Any, rt_out: Any, neg: int, key: tuple, rt_handle: tuple, num_outputs: int = 1
                        ) -> tuple[Any, Any] | Unpaired:
    """``(reference tuple, runtime tuple)`` for a reference op with several outputs, or why not."""
    if not _is_seq(rt_out) or not rt_out:
        return Unpaired("reference", key, Reason.MULTI_OUTPUT, "the reference op returns several tensors but the "
                        "runtime logged no tensor list", rt_handle)
    last = rt_out[neg] if len(rt_out) >= -neg else None
    if isinstance(last, list) and all(_shape(t) is not None for t in last):
        mapped = last
    elif _shape(last) is not None and num_outputs == len(aot_out) and len(rt_out) > num_outputs:
        # a delegate call logs its inputs, then its outputs: the op's tensors are the last ones
        mapped = rt_out[-num_outputs:]
    elif _shape(last) is not None:
        mapped = rt_out
    else:
        return Unpaired("reference", key, Reason.MULTI_OUTPUT,
                        "the runtime output is not a tensor or a list of tensors", rt_handle)
    return tuple(aot_out), tuple(mapped)


def _single_output_value(aot_out: Any, rt_out: Any, i: int, num_outputs: int, rt_handle: tuple
                         ) -> tuple[Any, str] | Unpaired:
    """``(runtime value, how it was chosen)`` for a reference op with one output, or why none fits."""
    neg = -(i + 1)
    if not _is_seq(rt_out):
        return rt_out, ""
    if len(rt_out) < -neg:
        return Unpaired("runtime", rt_handle, Reason.NO_INTERMEDIATE_OUTPUT,
                        f"the event logged {len(rt_out)} tensors, output {i} is missing", rt_handle)
    if num_outputs == 1 and len(rt_out) > 1 and _shape(aot_out) is not None:
        return _pick_by_shape(aot_out, rt_out)
    return rt_out[neg], "position"


def _numel(x: Any) -> int | None:
    n = getattr(x, "numel", None)
    return n() if callable(n) and hasattr(x, "dtype") else None


def _delegate_output_keys(rt_handle: tuple, rt_out: Any, num_outputs: int, aot_map: dict,
                          output_handles: Callable[[tuple], list | None] | None) -> list[tuple] | None:
    """The reference handle of each runtime output ``i`` (``-(i+1)``-th tensor) from the delegate's own
    output map, when it is known, has one handle per output and every size agrees; else None.

    ExecuTorch's rule takes the handle at position ``-(i+1)`` of the handle tuple, which is the
    delegate's ``i``-th output from the end only when its last nodes are its outputs in reverse
    order (not so in a recurrent step: see :mod:`.delegates`).
    """
    if output_handles is None or num_outputs < 2 or not _is_seq(rt_out) or len(rt_out) < num_outputs:
        return None
    outs = output_handles(rt_handle)
    if not outs or len(outs) != num_outputs:
        return None
    keys = [(outs[num_outputs - 1 - i],) for i in range(num_outputs)]
    for i, key in enumerate(keys):
        ref = aot_map.get(key)
        if ref is None or _is_seq(ref):
            continue
        if _numel(ref) is not None and _numel(rt_out[-(i + 1)]) is not None and \
                _numel(ref) != _numel(rt_out[-(i + 1)]):
            return None  # the map does not describe what the runtime logged: keep the positional rule
    return keys


def _pair_group(result: PairResult, group: int, rt_handle: tuple, rt_out: Any, num_outputs: int,
                aot_map: dict, output_handles: Callable[[tuple], list | None] | None = None) -> None:
    """Pair runtime output ``i`` (the ``-(i+1)``-th handle / tensor) of one event with its reference output."""
    aot_handles = tuple(aot_map)  # a tuple of int tuples: the collector stops tracking it
    combined = {k[0] for k in aot_handles if k}
    rt_set = set(rt_handle)
    made = 0
    mapped = _delegate_output_keys(rt_handle, rt_out, num_outputs, aot_map, output_handles)
    for i in range(num_outputs):
        neg = -(i + 1)
        if not combined <= rt_set:
            result.unpaired.append(Unpaired(
                "runtime", rt_handle, Reason.HANDLES_NOT_COVERED,
                f"reference handles {sorted(combined - rt_set)} of this group are not in the runtime "
                f"handle set", rt_handle))
            break
        if i >= len(rt_handle):
            result.unpaired.append(Unpaired(
                "runtime", rt_handle, Reason.MULTI_OUTPUT,
                f"the event has {num_outputs} outputs but only {len(rt_handle)} debug handles", rt_handle))
            break
        key = mapped[i] if mapped is not None else (rt_handle[neg],)
        if key not in aot_map:
            result.unpaired.append(Unpaired(
                "runtime", rt_handle, Reason.NO_REFERENCE_OUTPUT,
                f"output {i} maps to handle {key[0]}, which has no reference output", rt_handle))
            continue
        aot_out = aot_map[key]
        if _is_seq(aot_out):
            picked = _multi_output_value(aot_out, rt_out, neg, key, rt_handle, num_outputs)
            if isinstance(picked, Unpaired):
                result.unpaired.append(picked)
                continue
            (aot_value, rt_value), choice = picked, ""
        else:
            picked = _single_output_value(aot_out, rt_out, i, num_outputs, rt_handle)
            if isinstance(picked, Unpaired):
                result.unpaired.append(picked)
                continue
            aot_value, (rt_value, choice) = aot_out, picked
            if mapped is not None and mapped[i] != (rt_handle[neg],):
                choice = "delegate output map"
        _record_pair(result, (rt_handle, aot_value), rt_value,
                     PairInfo(group, i, key, aot_handles, rt_handle, choice))
        made += 1
    if made == 0:
        for k in aot_handles:
            result.unpaired.append(Unpaired("reference", k, Reason.NOT_COMPARED,
                                            "grouped with a runtime event but no output could be paired",
                                            rt_handle))


def _record_pair(result: PairResult, map_key: tuple, rt_value: Any, info: PairInfo) -> None:
    """Add one mapping entry; the same reference output chosen twice keeps the later (as ExecuTorch)."""
    if map_key in result.mapping:
        # the key holds a tensor: find it by identity (``list.index`` would compare tensors with ``==``,
        # which raises when another key's tensor has a different shape)
        idx = next(i for i, k in enumerate(result.mapping)
                   if k[0] == map_key[0] and all(a is b for a, b in zip(k[1:], map_key[1:])))
        result.info[idx] = info
    else:
        result.info.append(info)
    result.mapping[map_key] = (map_key[0], rt_value)


def pair_outputs(aot_outputs: dict, runtime_outputs: dict,
                 output_handles: Callable[[tuple], list | None] | None = None) -> PairResult:
    """Pair reference outputs with (merged) runtime outputs, ExecuTorch's way, near-linearly.

    Args:
        aot_outputs: ``{aot_handle_tuple: output}`` in reference-graph order (a tensor, a list of
            tensors for multi-output ops, or a Python scalar).
        runtime_outputs: ``{merged_runtime_handle_tuple: (output, num_outputs)}`` where ``output`` is
            the list of tensors the event logged.
        output_handles: ``handle tuple -> [handle of each output, in output order]`` for delegate
            calls (:meth:`.delegates.DelegateOutputs.output_handles`); where it answers with one handle
            per output, it replaces ExecuTorch's positional guess for events with several outputs.

    Returns:
        a :class:`PairResult`; ``mapping`` equals ExecuTorch's ``map_runtime_aot_intermediate_outputs``
        (same keys, same order) except that groups ExecuTorch would crash on are reported in
        ``unpaired`` instead.

    Steps: group entries sharing a handle (:func:`_connected_groups`); report groups that cannot
    pair (:func:`_unpairable_group`); pair each remaining group's runtime outputs with the
    reference outputs their handles name (:func:`_pair_group`).
    """
    aot_keys = list(aot_outputs)
    rt_keys = list(runtime_outputs)
    n_aot = len(aot_keys)
    result = PairResult()
    group_no = 0
    for members in _connected_groups(aot_keys, rt_keys):
        aot = [aot_keys[x] for x in members if x < n_aot]
        rt = [rt_keys[x - n_aot] for x in members if x >= n_aot]
        if len(rt) != 1 or not aot:
            result.unpaired.extend(_unpairable_group(aot, rt))
            continue
        rt_handle = rt[0]
        rt_out, num_outputs = runtime_outputs[rt_handle]
        _pair_group(result, group_no, rt_handle, rt_out, num_outputs, {k: aot_outputs[k] for k in aot},
                    output_handles)
        group_no += 1
    return result


class HandleNameIndex:
    """``find(handle_tuple)``: the names of every entry whose handles are a subset, in entry order.

    The same answer as ExecuTorch's ``find_op_names`` (which scans every entry for every row) from an
    inverted index ``handle -> entries``, so a table of N rows costs O(total handles), not O(N^2).
    """

    def __init__(self, names: dict) -> None:
        # compact on purpose: one index per side lives as long as its analysis, and thousands of
        # small sets and lists (one per entry) made the cyclic collector's full pass owed sooner
        self._keys = list(names)
        self._names = list(names.values())  # the callers' lists, not copies (read only)
        # an entry's handles: the int itself for a single handle (the usual case), else a frozenset
        self._sets: list = [k[0] if len(k) == 1 else frozenset(k) for k in self._keys]
        self._by_h: dict[int, Any] = {}  # handle -> entry index, or a list of them when several
        self._always: list[int] = []  # empty handle tuples are a subset of everything
        by_h = self._by_h
        for i, s in enumerate(self._sets):
            if isinstance(s, frozenset):
                if not s:
                    self._always.append(i)
                members: Iterable[int] = s
            else:
                members = (s,)
            for h in members:
                at = by_h.get(h)
                if at is None:
                    by_h[h] = i
                elif isinstance(at, list):
                    at.append(i)
                else:
                    by_h[h] = [at, i]

    def find(self, target: Iterable[int]) -> list[str]:
        want = set(target)
        cand = set(self._always)
        by_h = self._by_h
        for h in want:
            at = by_h.get(h)
            if at is None:
                continue
            if isinstance(at, list):
                cand.update(at)
            else:
                cand.add(at)
        out: list[str] = []
        sets = self._sets
        for i in sorted(cand):
            s = sets[i]
            if (s <= want) if isinstance(s, frozenset) else (s in want):
                out.extend(self._names[i])
        return out
