"""Decode the tables of ``program.fbs`` into the dataclasses of :mod:`._pte_model`.

Fields are named through the generated schema description :mod:`etlens.schema.program_fbs`
(``T.sizes`` is the ``Tensor.sizes`` field: its slot, type and default). Most tables go through
the generic, bounds-checked :class:`~._flatbuffers.Table` accessors. The hot tables of big programs
(``EValue`` → ``Tensor``/``Int`` and ``KernelCall``/``DelegateCall`` instructions: tens of
thousands in a 1000-layer model) are decoded with direct field access after one range check per
table, falling back to the generic path whenever a table does not fit that check, so damaged input
still produces the generic path's precise error. The direct path reads a table's field offsets out
of its vtable with an ``operator.itemgetter`` built once from the schema's slots, so it stays as
fast as literal slot numbers.
"""

from __future__ import annotations

import struct
from operator import itemgetter
from typing import Any, Callable

from ..schema import DATA_LOCATIONS, INSTRUCTION_KINDS, VALUE_KINDS
from ..schema import program_fbs as pfb
from ..schema.fbs import Field
from ._flatbuffers import FlatBuffer, Table
from ._pte_model import (AllocationInfo, Chain, CompileSpec, Delegate, ExecutionPlan, Frame, Instruction, Operator,
                         TensorValue, Value)

__all__ = ["decode_plan"]

T = pfb.Tensor
AD = pfb.AllocationDetails
XI = pfb.ExtraTensorInfo
EV = pfb.EValue
KT = pfb.KernelTypes
IA = pfb.InstructionArguments
KC = pfb.KernelCall
DC = pfb.DelegateCall
EP = pfb.ExecutionPlan
CH = pfb.Chain

_u32 = struct.Struct("<I").unpack_from
_i32 = struct.Struct("<i").unpack_from
_i8 = struct.Struct("<b").unpack_from
_i64 = struct.Struct("<q").unpack_from

_VEC_STRUCTS: dict[tuple[int, str], Any] = {}


def _slots_of(*fields: Field) -> tuple[int, Callable[[tuple[int, ...]], tuple[int, ...]]]:
    """``(vtable length needed, getter of the fields' offsets)`` for a direct-path table."""
    slots = [f.slot for f in fields]
    return max(slots) + 1, itemgetter(*slots)


_TENSOR_N, _tensor_offsets = _slots_of(T.scalar_type, T.storage_offset, T.sizes, T.dim_order, T.requires_grad,
                                       T.data_buffer_idx, T.allocation_info, T.layout, T.shape_dynamism,
                                       T.extra_tensor_info)
_ALLOC_N, _alloc_offsets = _slots_of(AD.memory_id, AD.memory_offset_low, AD.memory_offset_high)
_CALL_N, _kernel_offsets = _slots_of(KC.op_index, KC.args)
_delegate_offsets = _slots_of(DC.delegate_index, DC.args)[1]
_ZEROS = (0,) * 16
_EV_TAG, _EV_VAL = EV.val.slot, EV.val.slot + 1  # a union takes two slots: tag, then value
_INS_TAG, _INS_VAL = pfb.Instruction.instr_args.slot, pfb.Instruction.instr_args.slot + 1
_TAG_TENSOR, _TAG_INT = KT.Tensor, KT.Int
_TAG_KERNEL, _TAG_DELEGATE = IA.KernelCall, IA.DelegateCall
_INT_VAL = pfb.Int.int_val.slot


def _vector(fb: FlatBuffer, p: int, size: int, code: str, path: Any, name: str) -> tuple[Any, ...]:
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
    if len(vo) < _TENSOR_N:  # trailing fields equal to their default are left out of the vtable
        vo = vo + _ZEROS[len(vo):_TENSOR_N]
    (scalar_type, storage_offset, sizes, dim_order, requires_grad, data_buffer_idx, allocation_info, layout,
     shape_dynamism, extra_tensor_info) = _tensor_offsets(vo)
    if extra_tensor_info or max(storage_offset, sizes, dim_order, data_buffer_idx, allocation_info) + 4 > tlen \
            or max(scalar_type, requires_grad, layout, shape_dynamism) >= tlen:
        return _value_generic_tensor(fb.table_at(pos, path, ref))
    data = fb.data
    alloc = None
    if allocation_info:
        p = pos + allocation_info
        apos = p + _u32(data, p)[0]
        apath = (path, T.allocation_info.name, None)
        ao, atl = fb.locate(apos, apath, p)
        if len(ao) < _ALLOC_N:
            ao = ao + _ZEROS[len(ao):_ALLOC_N]
        memory_id, low, high = _alloc_offsets(ao)
        if max(memory_id, low, high) + 4 <= atl:
            lo = _u32(data, apos + low)[0] if low else 0
            hi = _u32(data, apos + high)[0] if high else 0
            alloc = AllocationInfo(_u32(data, apos + memory_id)[0] if memory_id else 0, lo | (hi << 32))
        else:
            alloc = _allocation(fb.table_at(apos, apath, p))
    st = data[pos + scalar_type] if scalar_type else 0
    return Value("tensor", TensorValue(
        scalar_type=st - 256 if st > 127 else st,
        sizes=_vector(fb, pos + sizes, 4, "i", path, "sizes") if sizes else (),
        dim_order=_vector(fb, pos + dim_order, 1, "B", path, "dim_order") if dim_order else (),
        data_buffer_idx=_u32(data, pos + data_buffer_idx)[0] if data_buffer_idx else 0,
        allocation=alloc,
        storage_offset=_i32(data, pos + storage_offset)[0] if storage_offset else 0,
        requires_grad=bool(data[pos + requires_grad]) if requires_grad else False,
        layout=_i8(data, pos + layout)[0] if layout else 0,
        shape_dynamism=_i8(data, pos + shape_dynamism)[0] if shape_dynamism else 0,
    ))


def _allocation(a: Table) -> AllocationInfo:
    return AllocationInfo(a.get(AD.memory_id), a.get(AD.memory_offset_low) | (a.get(AD.memory_offset_high) << 32))


def _values(plan: Table) -> list[Value]:
    """Decode the plan's value table; tensors and ints take a direct path, the rest the generic one."""
    start, n = plan.vector(EP.values.slot, 4, name=EP.values.name)
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
        if len(offs) > _EV_VAL:
            tag_off, val_off = offs[_EV_TAG], offs[_EV_VAL]
            if tag_off and val_off and tag_off < tlen and val_off + 4 <= tlen:
                tag = data[pos + tag_off]
                p = pos + val_off
                vpos = p + _u32(data, p)[0]
                vpath = (path, "val", None)
                if tag == _TAG_TENSOR:
                    append(_tensor_fast(fb, vpos, vpath, p))
                    continue
                if tag == _TAG_INT:
                    vo, vl = locate(vpos, vpath, p)
                    int_off = vo[_INT_VAL] if len(vo) > _INT_VAL else 0
                    if not int_off:  # int_val equal to its default (0) is left out
                        append(Value("int", 0))
                        continue
                    if int_off + 8 <= vl:
                        append(Value("int", _i64(data, vpos + int_off)[0]))
                        continue
        append(_value(fb.table_at(pos, path)))
    return out


def _value(t: Table) -> Value:
    """Decode one EValue table field by field (the generic path)."""
    tag, v = t.variant(EV.val)
    if v is None:
        if tag:
            t.fb.fail((t.path, "val", None), f"value of type {tag} has no data", t.pos, truncated=False)
        return Value("none")
    if tag == KT.Tensor:
        return _value_generic_tensor(v)
    if tag == KT.Int:
        return Value("int", v.get(pfb.Int.int_val))
    return _value_rest(tag, v)


def _value_generic_tensor(v: Table) -> Value:
    a = v.child(T.allocation_info)
    alloc = _allocation(a) if a is not None else None
    fqn = None
    external = False
    extra = v.child(T.extra_tensor_info)
    if extra is not None:
        fqn = extra.text(XI.fully_qualified_name)
        external = extra.get(XI.location) == pfb.TensorDataLocation.EXTERNAL
    return Value("tensor", TensorValue(
        scalar_type=v.get(T.scalar_type),
        sizes=v.items(T.sizes),
        dim_order=v.items(T.dim_order),
        data_buffer_idx=v.get(T.data_buffer_idx),
        allocation=alloc,
        storage_offset=v.get(T.storage_offset),
        requires_grad=v.get(T.requires_grad),
        layout=v.get(T.layout),
        shape_dynamism=v.get(T.shape_dynamism),
        fully_qualified_name=fqn,
        external=external,
    ))


#: KernelTypes tag -> the field holding the value of that member's table (all are field 0).
_MEMBER_FIELD: dict[int, Field] = {
    KT.Bool: pfb.Bool.bool_val, KT.Double: pfb.Double.double_val, KT.String: pfb.String.string_val,
    KT.IntList: pfb.IntList.items, KT.DoubleList: pfb.DoubleList.items, KT.BoolList: pfb.BoolList.items,
    KT.TensorList: pfb.TensorList.items, KT.OptionalTensorList: pfb.OptionalTensorList.items,
}


def _value_rest(tag: int, v: Table) -> Value:
    """Values other than tensors and ints, from the union's tag and table."""
    kind = VALUE_KINDS[tag] if tag < len(VALUE_KINDS) else f"unknown_{tag}"
    f = _MEMBER_FIELD.get(tag)
    if f is None:
        return Value(kind)  # Null (and unknown tags) carry no data
    if f.kind == "string":
        return Value(kind, v.text(f, ""))
    if tag == KT.BoolList:
        return Value(kind, tuple(b != 0 for b in v.scalars(f.slot, "B", name=f.name)))
    if f.kind == "vector":
        return Value(kind, v.items(f))
    return Value(kind, v.get(f))


def _instruction(t: Table) -> Instruction:
    tag, a = t.variant(pfb.Instruction.instr_args)
    kind = INSTRUCTION_KINDS[tag] if tag < len(INSTRUCTION_KINDS) else f"unknown_{tag}"
    if a is None:
        return Instruction(kind)
    if tag == IA.KernelCall:
        return Instruction(kind, op_index=a.get(KC.op_index), args=a.items(KC.args))
    if tag == IA.DelegateCall:
        return Instruction(kind, delegate_index=a.get(DC.delegate_index), args=a.items(DC.args))
    if tag == IA.MoveCall:
        return Instruction(kind, move_from=a.get(pfb.MoveCall.move_from), move_to=a.get(pfb.MoveCall.move_to))
    if tag == IA.JumpFalseCall:
        J = pfb.JumpFalseCall
        return Instruction(kind, cond_value_index=a.get(J.cond_value_index),
                           destination_instruction=a.get(J.destination_instruction))
    if tag == IA.FreeCall:
        return Instruction(kind, value_index=a.get(pfb.FreeCall.value_index))
    return Instruction(kind)


def _instructions(chain: Table) -> list[Instruction]:
    """Decode a chain's instructions; kernel and delegate calls take a direct path."""
    start, n = chain.vector(CH.instructions.slot, 4, name=CH.instructions.name)
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
        if len(offs) > _INS_VAL:
            tag_off, val_off = offs[_INS_TAG], offs[_INS_VAL]
            if tag_off and val_off and tag_off < tlen and val_off + 4 <= tlen:
                tag = data[pos + tag_off]
                if tag == _TAG_KERNEL or tag == _TAG_DELEGATE:
                    p = pos + val_off
                    apos = p + _u32(data, p)[0]
                    apath = (path, "instr_args", None)
                    ao, al = locate(apos, apath, p)
                    if len(ao) >= _CALL_N:
                        index_off, args_off = (_kernel_offsets if tag == _TAG_KERNEL else _delegate_offsets)(ao)
                        if max(index_off, args_off) + 4 <= al:
                            index = _i32(data, apos + index_off)[0] if index_off else 0
                            args = _vector(fb, apos + args_off, 4, "i", apath, "args") if args_off else ()
                            if tag == _TAG_KERNEL:
                                append(Instruction("KernelCall", op_index=index, args=args))
                            else:
                                append(Instruction("DelegateCall", delegate_index=index, args=args))
                            continue
        append(_instruction(fb.table_at(pos, path)))
    return out


def _frames(fl: Table) -> list[Frame]:
    F = pfb.Frame
    return [Frame(f.text(F.filename), f.get(F.lineno), f.text(F.name), f.text(F.context))
            for f in fl.children(pfb.FrameList.items)]


def _chain(t: Table) -> Chain:
    st = t.children(CH.stacktrace)
    return Chain(
        inputs=t.items(CH.inputs),
        outputs=t.items(CH.outputs),
        instructions=_instructions(t),
        stacktrace=[_frames(f) for f in st] if st else None,
    )


def _delegate(t: Table) -> Delegate:
    B = pfb.BackendDelegate
    R = pfb.BackendDelegateDataReference
    C = pfb.CompileSpec
    ref = t.child(B.processed)
    loc, idx = (ref.get(R.location), ref.get(R.index)) if ref is not None else (0, 0)
    specs = [CompileSpec(c.text(C.key, "") or "", bytes(c.blob(C.value))) for c in t.children(B.compile_specs)]
    return Delegate(t.text(B.id, "") or "", DATA_LOCATIONS.get(loc, f"location_{loc}"), idx, specs)


def _plan(t: Table) -> ExecutionPlan:
    meta = t.child(EP.container_meta_type)
    M = pfb.ContainerMetadata
    O = pfb.Operator  # noqa: E741
    return ExecutionPlan(
        name=t.text(EP.name, "") or "",
        values=_values(t),
        inputs=t.items(EP.inputs),
        outputs=t.items(EP.outputs),
        chains=[_chain(c) for c in t.children(EP.chains)],
        operators=[Operator(o.text(O.name, "") or "", o.text(O.overload, "") or "") for o in t.children(EP.operators)],
        delegates=[_delegate(d) for d in t.children(EP.delegates)],
        non_const_buffer_sizes=t.items(EP.non_const_buffer_sizes),
        encoded_inp_str=meta.text(M.encoded_inp_str) if meta is not None else None,
        encoded_out_str=meta.text(M.encoded_out_str) if meta is not None else None,
    )


decode_plan = _plan
