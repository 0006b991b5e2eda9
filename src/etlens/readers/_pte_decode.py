"""Decode the tables of ``program.fbs`` into the dataclasses of :mod:`._pte_model`.

Most tables go through the generic, bounds-checked :class:`~._flatbuffers.Table` accessors. The
hot tables of big programs (``EValue`` → ``Tensor``/``Int`` and ``KernelCall``/``DelegateCall``
instructions: tens of thousands in a 1000-layer model) are decoded with direct field access after
one range check per table, falling back to the generic path whenever a table does not fit that
check, so damaged input still produces the generic path's precise error.

Field numbers follow the declaration order in ``program.fbs``; a union takes two slots (type, value).
"""

from __future__ import annotations

import struct
from typing import Any

from ._flatbuffers import FlatBuffer, Table
from ._pte_model import (AllocationInfo, Chain, CompileSpec, Delegate, ExecutionPlan, Frame, Instruction, Operator,
                         TensorValue, Value)

__all__ = ["decode_plan"]

_VALUE_KINDS = ("none", "null", "int", "bool", "double", "tensor", "string", "int_list", "double_list",
                "bool_list", "tensor_list", "optional_tensor_list")
_INSTRUCTION_KINDS = ("none", "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall")
_LOCATIONS = {0: "INLINE", 1: "SEGMENT"}
_u32 = struct.Struct("<I").unpack_from
_i32 = struct.Struct("<i").unpack_from
_i8 = struct.Struct("<b").unpack_from
_i64 = struct.Struct("<q").unpack_from

_VEC_STRUCTS: dict[tuple[int, str], Any] = {}
_ZEROS10 = (0,) * 10


def _vector(fb: FlatBuffer, p: int, size: int, code: str, path: Any, name: str) -> tuple:
    """Scalars of the vector referenced by the offset field at absolute byte ``p`` (checked)."""
    data = fb.data
    q = p + _u32(data, p)[0]
    if q < fb.start or q + 4 > fb.end:
        fb.fail((path, name, None), "vector offset points outside the buffer", p)
    n = _u32(data, q)[0]
    if n * size > fb.end - q - 4:
        fb.fail((path, name, None), f"vector declares {n} elements of {size} bytes, more than the buffer holds", q)
    if not n:
        return ()
    key = (n, code)
    unpack = _VEC_STRUCTS.get(key)
    if unpack is None:
        unpack = struct.Struct(f"<{n}{code}").unpack_from
        if len(_VEC_STRUCTS) < 4096:
            _VEC_STRUCTS[key] = unpack
    return unpack(data, q + 4)


def _tensor_fast(fb: FlatBuffer, pos: int, path: Any, ref: int) -> Value:
    """Decode a Tensor table with direct field access (the hot path of big programs).

    Tensor fields are 1 or 4 bytes wide, so two checks (all 4-byte fields and all 1-byte fields end
    inside the table) replace the per-field checks; a table that fails them, or has the rare
    ``extra_tensor_info``, takes the generic path.
    """
    vo, tlen = fb.locate(pos, path, ref)
    if len(vo) < 10:
        vo = vo + _ZEROS10[len(vo):]
    if vo[9] or max(vo[1], vo[2], vo[3], vo[5], vo[6]) + 4 > tlen or max(vo[0], vo[4], vo[7], vo[8]) >= tlen:
        return _value_generic_tensor(fb.table_at(pos, path, ref))
    data = fb.data
    alloc = None
    if vo[6]:
        p = pos + vo[6]
        apos = p + _u32(data, p)[0]
        apath = (path, "allocation_info", None)
        ao, atl = fb.locate(apos, apath, p)
        if len(ao) < 3:  # trailing fields equal to their default are left out of the vtable
            ao = ao + _ZEROS10[len(ao):3]
        if max(ao[0], ao[1], ao[2]) + 4 <= atl:
            lo = _u32(data, apos + ao[1])[0] if ao[1] else 0
            hi = _u32(data, apos + ao[2])[0] if ao[2] else 0
            alloc = AllocationInfo(_u32(data, apos + ao[0])[0] if ao[0] else 0, lo | (hi << 32))
        else:
            a = fb.table_at(apos, apath, p)
            alloc = AllocationInfo(a.u32(0), a.u32(1) | (a.u32(2) << 32))
    st = data[pos + vo[0]] if vo[0] else 0
    return Value("tensor", TensorValue(
        scalar_type=st - 256 if st > 127 else st,
        sizes=_vector(fb, pos + vo[2], 4, "i", path, "sizes") if vo[2] else (),
        dim_order=_vector(fb, pos + vo[3], 1, "B", path, "dim_order") if vo[3] else (),
        data_buffer_idx=_u32(data, pos + vo[5])[0] if vo[5] else 0,
        allocation=alloc,
        storage_offset=_i32(data, pos + vo[1])[0] if vo[1] else 0,
        requires_grad=bool(data[pos + vo[4]]) if vo[4] else False,
        layout=_i8(data, pos + vo[7])[0] if vo[7] else 0,
        shape_dynamism=_i8(data, pos + vo[8])[0] if vo[8] else 0,
    ))


def _values(plan: Table) -> list[Value]:
    """Decode the plan's value table; tensors and ints take a direct path, the rest the generic one."""
    start, n = plan.vector(2, 4, name="values")
    if not n:
        return []
    fb = plan.fb
    data = fb.data
    locate = fb.locate
    ppath = plan.path
    out: list[Value] = []
    append = out.append
    for i, rel in enumerate(struct.unpack_from(f"<{n}I", data, start)):
        path = (ppath, "values", i)
        pos = start + 4 * i + rel
        offs, tlen = locate(pos, path, start + 4 * i)
        if len(offs) >= 2 and offs[0] and offs[1] and offs[0] < tlen and offs[1] + 4 <= tlen:
            tag = data[pos + offs[0]]
            p = pos + offs[1]
            vpos = p + _u32(data, p)[0]
            vpath = (path, "val", None)
            if tag == 5:
                append(_tensor_fast(fb, vpos, vpath, p))
                continue
            if tag == 2:
                vo, vl = locate(vpos, vpath, p)
                if not vo or not vo[0]:  # int_val equal to its default (0) is left out
                    append(Value("int", 0))
                    continue
                if vo[0] + 8 <= vl:
                    append(Value("int", _i64(data, vpos + vo[0])[0]))
                    continue
        append(_value(fb.table_at(pos, path)))
    return out


def _value(t: Table) -> Value:
    """Decode one EValue table field by field (the generic path)."""
    tag, v = t.union(0, name="val")
    if v is None:
        if tag:
            t.fb.fail((t.path, "val", None), f"value of type {tag} has no data", t.pos, truncated=False)
        return Value("none")
    if tag == 5:
        return _value_generic_tensor(v)
    if tag == 2:
        return Value("int", v.i64(0))
    return _value_rest(tag, v)


def _value_generic_tensor(v: Table) -> Value:
    alloc = None
    a = v.table(6, name="allocation_info")
    if a is not None:
        alloc = AllocationInfo(a.u32(0), a.u32(1) | (a.u32(2) << 32))
    fqn = None
    external = False
    extra = v.table(9, name="extra_tensor_info")
    if extra is not None:
        fqn = extra.string(1, name="fully_qualified_name")
        external = extra.u8(2) == 1
    return Value("tensor", TensorValue(
        scalar_type=v.i8(0),
        sizes=v.scalars(2, "i", name="sizes"),
        dim_order=v.scalars(3, "B", name="dim_order"),
        data_buffer_idx=v.u32(5),
        allocation=alloc,
        storage_offset=v.i32(1),
        requires_grad=v.bool(4),
        layout=v.i8(7),
        shape_dynamism=v.i8(8),
        fully_qualified_name=fqn,
        external=external,
    ))


def _value_rest(tag: int, v: Table) -> Value:
    """Values other than tensors and ints, from the union's tag and table."""
    if tag == 3:
        return Value("bool", v.bool(0))
    if tag == 4:
        return Value("double", v.f64(0))
    if tag == 6:
        return Value("string", v.string(0, ""))
    if tag == 7:
        return Value("int_list", v.scalars(0, "q", name="items"))
    if tag == 8:
        return Value("double_list", v.scalars(0, "d", name="items"))
    if tag == 9:
        return Value("bool_list", tuple(b != 0 for b in v.scalars(0, "B", name="items")))
    if tag == 10:
        return Value("tensor_list", v.scalars(0, "i", name="items"))
    if tag == 11:
        return Value("optional_tensor_list", v.scalars(0, "i", name="items"))
    if tag == 1:
        return Value("null")
    return Value(f"unknown_{tag}")


def _instruction(t: Table) -> Instruction:
    tag, a = t.union(0, name="instr_args")
    kind = _INSTRUCTION_KINDS[tag] if tag < len(_INSTRUCTION_KINDS) else f"unknown_{tag}"
    if a is None:
        return Instruction(kind)
    if tag == 1:
        return Instruction(kind, op_index=a.i32(0), args=a.scalars(1, "i", name="args"))
    if tag == 2:
        return Instruction(kind, delegate_index=a.i32(0), args=a.scalars(1, "i", name="args"))
    if tag == 3:
        return Instruction(kind, move_from=a.i32(0), move_to=a.i32(1))
    if tag == 4:
        return Instruction(kind, cond_value_index=a.i32(0), destination_instruction=a.i32(1))
    if tag == 5:
        return Instruction(kind, value_index=a.i32(0))
    return Instruction(kind)


def _instructions(chain: Table) -> list[Instruction]:
    """Decode a chain's instructions; kernel and delegate calls take a direct path."""
    start, n = chain.vector(2, 4, name="instructions")
    if not n:
        return []
    fb = chain.fb
    data = fb.data
    locate = fb.locate
    cpath = chain.path
    out: list[Instruction] = []
    append = out.append
    for i, rel in enumerate(struct.unpack_from(f"<{n}I", data, start)):
        path = (cpath, "instructions", i)
        pos = start + 4 * i + rel
        offs, tlen = locate(pos, path, start + 4 * i)
        if len(offs) >= 2 and offs[0] and offs[1] and offs[0] < tlen and offs[1] + 4 <= tlen:
            tag = data[pos + offs[0]]
            if tag == 1 or tag == 2:
                p = pos + offs[1]
                apos = p + _u32(data, p)[0]
                apath = (path, "instr_args", None)
                ao, al = locate(apos, apath, p)
                if len(ao) >= 2 and max(ao[0], ao[1]) + 4 <= al:
                    index = _i32(data, apos + ao[0])[0] if ao[0] else 0
                    args = _vector(fb, apos + ao[1], 4, "i", apath, "args") if ao[1] else ()
                    if tag == 1:
                        append(Instruction("KernelCall", op_index=index, args=args))
                    else:
                        append(Instruction("DelegateCall", delegate_index=index, args=args))
                    continue
        append(_instruction(fb.table_at(pos, path)))
    return out


def _frames(fl: Table) -> list[Frame]:
    return [Frame(f.string(0, name="filename"), f.i32(1), f.string(2, name="name"), f.string(3, name="context"))
            for f in fl.tables(0, name="items")]


def _chain(t: Table) -> Chain:
    st = t.tables(3, name="stacktrace")
    return Chain(
        inputs=t.scalars(0, "i", name="inputs"),
        outputs=t.scalars(1, "i", name="outputs"),
        instructions=_instructions(t),
        stacktrace=[_frames(f) for f in st] if st else None,
    )


def _delegate(t: Table) -> Delegate:
    ref = t.table(1, name="processed")
    loc, idx = (ref.i8(0), ref.u32(1)) if ref is not None else (0, 0)
    specs = [CompileSpec(c.string(0, "", name="key") or "", bytes(c.bytes(1, name="value")))
             for c in t.tables(2, name="compile_specs")]
    return Delegate(t.string(0, "", name="id") or "", _LOCATIONS.get(loc, f"location_{loc}"), idx, specs)


def _plan(t: Table) -> ExecutionPlan:
    meta = t.table(1, name="container_meta_type")
    return ExecutionPlan(
        name=t.string(0, "", name="name") or "",
        values=_values(t),
        inputs=t.scalars(3, "i", name="inputs"),
        outputs=t.scalars(4, "i", name="outputs"),
        chains=[_chain(c) for c in t.tables(5, name="chains")],
        operators=[Operator(o.string(0, "", name="name") or "", o.string(1, "", name="overload") or "")
                   for o in t.tables(6, name="operators")],
        delegates=[_delegate(d) for d in t.tables(7, name="delegates")],
        non_const_buffer_sizes=t.scalars(8, "q", name="non_const_buffer_sizes"),
        encoded_inp_str=meta.string(0, name="encoded_inp_str") if meta is not None else None,
        encoded_out_str=meta.string(1, name="encoded_out_str") if meta is not None else None,
    )


decode_plan = _plan
