"""Hand-built ETDumps (the Python ``flatbuffers`` builder, the ``etdump.fbs`` slots) for reader tests.

Real dumps come from the runtime (tests/conftest.py); these cover what a short real run never has:
hundreds of runs, runs that differ in one byte of one name, duplicate events, 32-bit counter
wrap-around, allocation events, empty runs, absent and empty names, and tables that omit default
fields (so one kind of table has several vtables). :func:`many_runs` is the standard mix.
"""

from __future__ import annotations

import random

import flatbuffers

__all__ = ["build", "many_runs"]


def _profile(b: flatbuffers.Builder, e: dict) -> int:
    name = b.CreateString(e["name"]) if e.get("name") is not None else None
    dstr = b.CreateString(e["dstr"]) if e.get("dstr") is not None else None
    b.StartObject(8)
    if name is not None:
        b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependInt32Slot(1, e.get("chain", 0), 0)
    b.PrependInt32Slot(2, e.get("instr", -1), -1)
    b.PrependInt32Slot(3, e.get("did", -1), -1)
    if dstr is not None:
        b.PrependUOffsetTRelativeSlot(4, dstr, 0)
    b.PrependUint64Slot(6, e["start"], 0)
    b.PrependUint64Slot(7, e["end"], 0)
    return b.EndObject()


def _allocation(b: flatbuffers.Builder, e: dict) -> int:
    b.StartObject(2)
    b.PrependInt32Slot(0, e.get("allocator", 0), 0)
    b.PrependUint64Slot(1, e.get("size", 64), 0)
    return b.EndObject()


def _debug(b: flatbuffers.Builder, e: dict) -> int:
    name = b.CreateString(e["name"]) if e.get("name") is not None else None
    b.StartObject(6)
    b.PrependUint64Slot(0, e.get("chain", 0), 0)
    b.PrependInt32Slot(1, e.get("instr", -1), -1)
    if name is not None:
        b.PrependUOffsetTRelativeSlot(5, name, 0)
    return b.EndObject()


def build(runs: list[dict], version: int = 0) -> bytes:
    """An ETDump of ``runs``: ``{"name", "bundled" (optional), "events": [event, ...]}``.

    An event is ``{"kind": "profile", "name", "instr", "chain", "did", "dstr", "start", "end"}``
    (absent keys: schema defaults / absent strings), ``{"kind": "allocation"}`` or
    ``{"kind": "debug", "name", "instr", "chain"}`` (no value).
    """
    b = flatbuffers.Builder(1 << 16)
    run_offs = []
    for run in runs:
        ev_offs = []
        for e in run["events"]:
            kind = e.get("kind", "profile")
            inner = {"profile": _profile, "allocation": _allocation, "debug": _debug}[kind](b, e)
            b.StartObject(3)
            b.PrependUOffsetTRelativeSlot({"profile": 0, "allocation": 1, "debug": 2}[kind], inner, 0)
            ev_offs.append(b.EndObject())
        b.StartVector(4, len(ev_offs), 4)
        for o in reversed(ev_offs):
            b.PrependUOffsetTRelative(o)
        events = b.EndVector()
        name = b.CreateString(run["name"])
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependInt32Slot(1, run.get("bundled", -1), -1)
        b.PrependUOffsetTRelativeSlot(3, events, 0)
        run_offs.append(b.EndObject())
    b.StartVector(4, len(run_offs), 4)
    for o in reversed(run_offs):
        b.PrependUOffsetTRelative(o)
    vec = b.EndVector()
    b.StartObject(2)
    b.PrependUint32Slot(0, version, 0)
    b.PrependUOffsetTRelativeSlot(1, vec, 0)
    root = b.EndObject()
    b.FinishSizePrefixed(root, file_identifier=b"ED00")
    return bytes(b.Output())


def _execute_run(rng: random.Random, ops: int, clock: list[int], *, rename: int | None = None,
                 duplicate: int | None = None, allocations: bool = False, wrap: bool = False) -> list[dict]:
    """One ``Execute`` run: per instruction ``OPERATOR_CALL`` + a kernel (or a delegate call with
    events timed inside the backend), then ``Method::execute`` around it all."""
    events: list[dict] = []
    t0 = clock[0]
    kernels = ["native_call_addmm.out", "native_call_relu.out", "native_call_permute_copy.out"]
    for i in range(ops):
        s = clock[0]
        if i % 7 == 3:     # a delegate: DELEGATE_CALL plus two events logged inside it (int and string ids)
            events.append({"name": "DELEGATE_CALL", "instr": i, "start": s, "end": s + rng.randint(50, 500)})
            a, z = s + 5, s + 5 + rng.randint(1, 300)
            if wrap and i == 3:
                a, z = 2 ** 32 - 40, 25          # a 32-bit counter wrapping inside the delegate
            events.append({"name": "", "instr": i, "did": 0, "start": a, "end": z})
            events.append({"name": "ignored", "instr": i, "dstr": "conv_1", "start": s + 9, "end": s + 60})
        else:
            k = kernels[i % 3]
            if rename == i:
                k = k[:-1] + "X"                  # same length, one byte different
            e = s + rng.randint(10, 2000)
            if wrap and i == 1:
                s, e = 2 ** 32 - 7, 1000          # wrap-around of a portable kernel's timer
            events.append({"name": k, "instr": i, "start": s + 3, "end": e})
            events.append({"name": "OPERATOR_CALL", "instr": i, "start": s, "end": e + 2})
            if duplicate == i:                  # the same signature twice: the Inspector keeps the last
                events.append({"name": k, "instr": i, "start": s + 4, "end": e + 9})
        if allocations and i % 5 == 0:
            events.append({"kind": "allocation", "allocator": 0, "size": 128 * i})
        clock[0] += rng.randint(2000, 4000)
    events.append({"name": "Method::execute", "instr": 0, "chain": -1, "start": t0, "end": clock[0]})
    return events


def many_runs(runs: int = 60, ops: int = 40, seed: int = 0, *, debug: bool = False, allocations: bool = True) -> bytes:
    """A dump like a device farm's: ``Default`` (init/load) then ``runs`` runs of ``Execute``, with
    the odd ones out (a renamed kernel, a duplicated event, allocations, an empty run, another
    bundled input, counter wrap-around, optionally a debug event). ExecuTorch's Inspector refuses
    allocation events ("Unable to find populated event"): ``allocations=False`` leaves them out."""
    rng = random.Random(seed)
    clock = [10_000]
    out = [{"name": "Default", "events": [
        {"name": "Method::init", "instr": 0, "chain": -1, "start": 10, "end": 900},
        {"name": "Program::load_method", "instr": 0, "chain": -1, "start": 5, "end": 950}]}]
    for r in range(runs):
        kw: dict = {}
        if r == 7:
            kw["rename"] = 5
        if r in (9, 31):
            kw["duplicate"] = 4
        if r == 11 and allocations:
            kw["allocations"] = True
        if r == 13:
            kw["wrap"] = True
        events = _execute_run(rng, ops, clock, **kw)
        if debug and r == 17:
            events.insert(2, {"kind": "debug", "name": "", "instr": 1, "chain": 0})
        run = {"name": "Execute", "events": [] if r == 21 else events}
        if r == 25:
            run["bundled"] = 1
        out.append(run)
    return build(out)
