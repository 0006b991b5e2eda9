"""Decode the QNN delegate's compile spec (readers floor): the ``qnn_compile_spec`` entry of a QnnBackend delegate.

ExecuTorch's Qualcomm flow (``generate_qnn_executorch_compiler_spec``) stores one compile spec,
``qnn_compile_spec``, whose value is a ``QnnExecuTorchOptions`` FlatBuffer
(``executorch/backends/qualcomm/serialization/qc_compiler_spec.fbs``, generated into ``schema.py``):
the SoC (``soc_info.soc_model``: ``SM8650`` = Snapdragon 8 Gen 3) and its HTP architecture
(``soc_info.htp_info.htp_arch``: ``V75``), the backend (HTP, GPU, LPAI) with its options (precision
``kHtpFp16`` vs ``kHtpQuantized``, performance mode, VTCM size), the profile level (``kProfileDetailed``
gives per-op cycle events) and whether intermediate outputs are dumped.

Example::

    facts = decode_specs(delegate.compile_specs)
    facts["soc_model"], facts["htp_arch"], facts["precision"]     # 'SM8650', 'V75', 'fp16'
"""

from __future__ import annotations

from typing import Any, Iterable

from etlens.errors import FormatError
from etlens.readers import FlatBuffer

from . import schema as q

__all__ = ["SPEC_KEY", "decode", "decode_specs", "decode_options"]

#: the compile spec key ExecuTorch's Qualcomm flow writes (``QCOM_QNN_COMPILE_SPEC``)
SPEC_KEY = "qnn_compile_spec"
_PRECISION = {q.QnnExecuTorchHtpPrecision.kHtpFp16: "fp16", q.QnnExecuTorchHtpPrecision.kHtpQuantized: "int8"}
_PROFILE = {0: "off", 1: "basic", 2: "detailed", 3: "optrace"}


def _name(enum: Any, value: int) -> str:
    return enum.NAMES.get(value, str(value))


def decode_options(value: bytes | memoryview, name: str = "qnn_compile_spec") -> dict[str, Any]:
    """The facts of one ``QnnExecuTorchOptions`` FlatBuffer (raises :class:`FormatError` when it is not one)."""
    data = bytes(value)
    if len(data) < 8:
        raise FormatError(f"{name}: {len(data)} bytes is too short for a QnnExecuTorchOptions FlatBuffer")
    fb = FlatBuffer(data, name, what="QnnExecuTorchOptions")
    root = fb.root("QnnExecuTorchOptions")
    opt = q.QnnExecuTorchOptions
    out: dict[str, Any] = {}
    soc = root.child(opt.soc_info)
    if soc is not None:
        chip = soc.get(q.SocInfo.soc_model)
        out["soc_model"] = _name(q.QcomChipset, chip)
        out["soc_model_id"] = chip
        htp = soc.child(q.SocInfo.htp_info)
        if htp is not None:
            out["htp_arch"] = _name(q.HtpArch, htp.get(q.HtpInfo.htp_arch))
            out["vtcm_size_mb"] = htp.get(q.HtpInfo.vtcm_size_in_mb)
    bo = root.child(opt.backend_options)
    if bo is not None:
        bt = bo.get(q.QnnExecuTorchBackendOptions.backend_type)
        out["backend_type"] = _name(q.QnnExecuTorchBackendType, bt).removeprefix("k").removesuffix("Backend")
        htp_o = bo.child(q.QnnExecuTorchBackendOptions.htp_options)
        if htp_o is not None:
            H = q.QnnExecuTorchHtpBackendOptions
            prec = htp_o.get(H.precision)
            out["precision"] = _PRECISION.get(prec, _name(q.QnnExecuTorchHtpPrecision, prec))
            out["performance_mode"] = _name(q.QnnExecuTorchHtpPerformanceMode, htp_o.get(H.performance_mode))
            out["pd_session"] = _name(q.QnnExecuTorchHtpPdSession, htp_o.get(H.pd_session))
            for f in (H.use_conv_hmx, H.use_dlbc, H.use_fold_relu, H.use_multi_contexts, H.use_weight_sharing,
                      H.use_slc_allocator):
                out[f.name] = bool(htp_o.get(f))
            out["max_sf_buf_size"] = htp_o.get(H.max_sf_buf_size)
    level = root.get(opt.profile_level)
    out["profile_level"] = level
    out["profile"] = _PROFILE.get(level, str(level))
    out["dump_intermediate_outputs"] = bool(root.get(opt.dump_intermediate_outputs))
    out["online_prepare"] = bool(root.get(opt.online_prepare))
    out["shared_buffer"] = bool(root.get(opt.shared_buffer))
    out["is_from_context_binary"] = bool(root.get(opt.is_from_context_binary))
    out["log_level"] = _name(q.QnnExecuTorchLogLevel, root.get(opt.log_level))
    out["library_path"] = root.text(opt.library_path, "") or ""
    return out


def decode_specs(specs: Iterable[Any]) -> dict[str, Any]:
    """Facts of a delegate's compile specs (objects with ``key`` and ``value``); {} without ``qnn_compile_spec``."""
    for cs in specs:
        if getattr(cs, "key", None) == SPEC_KEY:
            return decode_options(cs.value)
    return {}


def decode(specs: Iterable[Any]) -> dict[str, Any]:
    """The ``compile_spec`` hook: :func:`decode_specs`."""
    return decode_specs(specs)
