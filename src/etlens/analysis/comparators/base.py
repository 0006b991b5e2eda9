"""The comparator base class: ``preprocessing`` + ``element_compare`` -> one gap table.

A comparator turns pairs of (reference output, runtime output) into distances. It mirrors the
shape of ExecuTorch's ``NumericalComparatorBase`` so that a comparator written for ExecuTorch works
here unchanged:

* :meth:`NumericalComparatorBase.preprocessing` may rewrite the whole mapping first (dequantize a
  runtime tensor, change a layout, drop pairs) and must return a mapping of the same form;
* :meth:`NumericalComparatorBase.element_compare` returns one float for one pair of tensors;
* :meth:`NumericalComparatorBase.compare` runs both and builds the DataFrame rows
  (``aot_debug_handle``, ``aot_ops``, ``aot_intermediate_output``, ``runtime_ops``,
  ``runtime_debug_handle``, ``runtime_intermediate_output``, ``gap``).

Example: compare after dequantizing int8 runtime tensors with a known scale::

    from etlens.analysis.comparators import NumericalComparatorBase, to_float64

    class DequantMSE(NumericalComparatorBase):
        def preprocessing(self, mapping):
            return {k: (h, v.float() * 0.05 if v.dtype == torch.int8 else v) for k, (h, v) in mapping.items()}
        def element_compare(self, a, b):
            return float(((to_float64(a) - to_float64(b)) ** 2).mean())

    insp.calculate_numeric_gap(DequantMSE())

Metrics are never rounded: ``gap`` holds the full float64 result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Callable

from ..protocols import InspectorLike

__all__ = ["NumericalComparatorBase", "IntermediateOutputMapping", "DebugHandle", "to_float64", "to_numpy64",
           "aligned_pair", "ElementwiseMetric"]

DebugHandle = tuple  # tuple[int, ...]
#: ``{(aot_handle, aot_output): (runtime_handle, runtime_output)}`` (ExecuTorch's mapping form)
IntermediateOutputMapping = dict


def to_float64(value: Any):
    """``value`` (tensor, bf16/fp16/int tensor, bool, or Python scalar) as a CPU float64 tensor.

    NaN becomes 0 (and then +-inf become the largest finite float64), exactly as ExecuTorch's
    comparators do, so a NaN in both outputs does not make every metric NaN.
    """
    import torch

    if isinstance(value, Sequence) and not isinstance(value, str):
        raise ValueError(f"expected a tensor or a scalar, got a sequence of {len(value)} items")
    try:
        t = torch.as_tensor(value, dtype=torch.float64)
    except Exception as exc:  # noqa: BLE001 - report what could not be converted
        raise ValueError(f"cannot convert {type(value).__name__} to a tensor: {exc}") from exc
    t = t.detach().cpu()
    if t.is_floating_point() and torch.isnan(t).any():
        t = torch.nan_to_num(t)
    return t


def to_numpy64(value: Any):
    """``value`` as a float64 numpy array, with :func:`to_float64`'s NaN rule (the built-in metrics'
    fast path: numpy's small-array arithmetic costs a fraction of torch's per-call dispatch)."""
    import numpy as np

    if isinstance(value, Sequence) and not isinstance(value, str):
        raise ValueError(f"expected a tensor or a scalar, got a sequence of {len(value)} items")
    if hasattr(value, "detach") and hasattr(value, "dtype"):
        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        arr = _tensor_numpy64(np, t)
    else:
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"cannot convert {type(value).__name__} to a tensor: {exc}") from exc
    # one reduction in the common case; the exact NaN test only when something is not finite
    if arr.size and not np.isfinite(arr.sum()) and np.isnan(arr).any():
        arr = np.nan_to_num(arr)
    return arr


def aligned_pair(a: Any, b: Any):
    """``(a, b)`` as float64 numpy arrays ready for element-wise arithmetic.

    When the shapes differ but the element counts agree (a runtime ``view`` is free, so the runtime
    logs the tensor before the reshape: ``(1, 8, 4, 8)`` against ``(1, 8, 32)``), ``b`` is reshaped
    to ``a``'s shape in memory order. Other shapes are left to broadcasting, as ExecuTorch does.
    """
    na, nb = to_numpy64(a), to_numpy64(b)
    if na.shape != nb.shape and na.size == nb.size:
        nb = nb.reshape(na.shape)
    return na, nb


class NumericalComparatorBase(ABC):
    """Base of every metric. Subclass and implement :meth:`element_compare`.

    Attributes:
        name: short metric name shown in tables (``"MSE"``).
        higher_is_better: ``True`` for similarity metrics (SNR, cosine), where a gap *below* a
            threshold is the bad side; ``False`` for distances (MSE, L1, max_abs).
    """

    name: str = "custom"
    higher_is_better: bool = False

    def __init__(self, inspector: InspectorLike | None = None) -> None:
        self._inspector = inspector

    @property
    def inspector(self) -> Any:
        """The Inspector this comparator works for (set by ``calculate_numeric_gap`` when unset)."""
        return self._inspector

    @inspector.setter
    def inspector(self, value: Any) -> None:
        self._inspector = value

    def preprocessing(self, mapping: IntermediateOutputMapping) -> IntermediateOutputMapping:
        """Rewrite the mapping before comparing (dequantize, change layout...). Default: unchanged."""
        return mapping

    @abstractmethod
    def element_compare(self, a: Any, b: Any) -> float:
        """One distance for one pair: ``a`` is the reference output, ``b`` the runtime output."""

    def crosses(self, gap: float, threshold: float) -> bool:
        """Whether ``gap`` is on the bad side of ``threshold`` for this metric (NaN always is)."""
        if gap != gap:  # NaN
            return True
        return gap < threshold if self.higher_is_better else gap > threshold

    @staticmethod
    def _validate_preprocessing_output(mapping: Any) -> None:
        if not isinstance(mapping, dict):
            raise TypeError(f"preprocessing() must return a dict {{(aot_handle, aot_output): "
                            f"(runtime_handle, runtime_output)}}, got {type(mapping).__name__}")
        for key, value in mapping.items():
            for what, pair in (("key", key), ("value", value)):
                if not isinstance(pair, tuple) or len(pair) != 2:
                    raise ValueError(f"preprocessing() returned a {what} that is not a (debug_handle, output) "
                                     f"pair: {pair!r:.200}")
                handle = pair[0]
                if not isinstance(handle, tuple) or not all(isinstance(x, int) for x in handle):
                    raise ValueError(f"preprocessing() returned a debug handle that is not a tuple of ints: "
                                     f"{handle!r:.200}")

    def _compare_intermediate_outputs(self, a: Any, b: Any) -> list[float]:
        a_seq = isinstance(a, Sequence)
        b_seq = isinstance(b, Sequence)
        if a_seq and b_seq:
            if len(a) != len(b):
                raise ValueError(f"cannot compare {len(a)} reference outputs with {len(b)} runtime outputs")
            return [self.element_compare(x, y) for x, y in zip(a, b)]
        if not a_seq and not b_seq:
            return [self.element_compare(a, b)]
        raise ValueError("cannot compare a sequence of outputs with a single output")

    #: Built-in metrics define ``_rowwise(np, x, y)``: the metric of every row of two ``(n, k)``
    #: float64 arrays at once, the same numbers :meth:`element_compare` gives one pair at a time.
    _rowwise: Callable | None = None

    def compare_batch(self, pairs: Sequence[tuple[Any, Any]]) -> dict[int, list[float]]:
        """Gaps of many ``(reference tensor, runtime tensor)`` pairs at once: ``{index: [gap]}``.

        Why: one ``element_compare`` costs ~100 µs, nearly all of it numpy/torch call overhead on
        small tensors, which dominates the table of a 1000-layer model. Pairs of contiguous CPU
        tensors with the same shape, dtypes and element count are stacked into one ``(n, k)``
        float64 array and reduced along the rows: numpy sums each row with the same pairwise
        summation as a 1-D array, so every gap is bit-identical to the one-by-one result.

        Only the pairs that could be batched are in the result; the caller compares the rest one by
        one. Nothing is batched when the metric has no ``_rowwise`` or a subclass overrides
        ``element_compare``/``_compare``/``_compare_intermediate_outputs`` (its own rule must apply).
        """
        rowwise = self._batchable()
        if rowwise is None or not pairs:
            return {}
        import numpy as np
        import torch

        groups: dict[tuple, list[int]] = {}
        for i, (a, b) in enumerate(pairs):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                continue
            n = a.numel()
            if (n == 0 or n != b.numel() or a.is_complex() or b.is_complex() or a.device.type != "cpu"
                    or b.device.type != "cpu" or not a.is_contiguous() or not b.is_contiguous()):
                continue
            groups.setdefault((tuple(a.shape), a.dtype, b.dtype, n), []).append(i)
        out: dict[int, list[float]] = {}
        for idx in groups.values():
            x = _stack64(np, torch, [pairs[i][0] for i in idx])
            y = _stack64(np, torch, [pairs[i][1] for i in idx])
            with np.errstate(all="ignore"):  # inf - inf and 0/0 give nan / inf silently, as in torch
                gaps = rowwise(np, x, y).tolist()
            out.update((i, [g]) for i, g in zip(idx, gaps))
        return out

    def _batchable(self) -> Callable | None:
        """``self._rowwise`` when the class that defines it also defines the metric actually used."""
        mro = type(self).__mro__
        owner = next((c for c in mro if c.__dict__.get("_rowwise") is not None), None)
        if owner is None:
            return None
        for c in mro[:mro.index(owner)]:
            if any(name in c.__dict__ for name in ("element_compare", "_compare", "_reduce",
                                                   "_compare_intermediate_outputs")):
                return None
        return self._rowwise

    def compare(self, mapping: IntermediateOutputMapping, aot_debug_handle_to_op_names: Any,
                runtime_debug_handle_to_op_names: Any):
        """Preprocess, compare every pair, return the gap DataFrame (ExecuTorch's columns and row order).

        ``*_op_names`` are either plain ``{handle: [names]}`` dicts or objects with a
        ``find(handle) -> [names]`` method (etlens passes indexed ones so the lookup stays linear).
        """
        import pandas as pd

        processed = self.preprocessing(mapping)
        self._validate_preprocessing_output(processed)
        find_aot = _finder(aot_debug_handle_to_op_names)
        find_rt = _finder(runtime_debug_handle_to_op_names)
        rows = []
        for (aot_handle, aot_out), (rt_handle, rt_out) in processed.items():
            if aot_out is None or rt_out is None:
                continue
            # ExecuTorch skips reference outputs that are several tensors (e.g. an undecomposed
            # ``unbind`` in the ATen graph); etlens reports them in explain_unpaired instead.
            if isinstance(aot_out, Sequence) and len(aot_out) > 1:
                continue
            rows.append({
                "aot_debug_handle": aot_handle,
                "aot_ops": find_aot(aot_handle),
                "aot_intermediate_output": aot_out,
                "runtime_ops": find_rt(rt_handle),
                "runtime_debug_handle": rt_handle,
                "runtime_intermediate_output": rt_out,
                "gap": self._compare_intermediate_outputs(aot_out, rt_out),
            })
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _stack64(np: Any, torch: Any, tensors: list) -> Any:
    """``(n, k)`` float64 rows of equally shaped tensors, with :func:`to_numpy64`'s NaN rule per row."""
    with torch.no_grad():
        shape = tensors[0].shape
        if all(x.shape == shape for x in tensors):  # the usual case: one stack, then one reshape
            stacked = torch.stack(tensors).reshape(len(tensors), -1)
        else:  # same element count, other shapes ((1, 8) against (8,)): flatten each first
            stacked = torch.stack([x.reshape(-1) for x in tensors])
    arr = _tensor_numpy64(np, stacked)
    nan_rows = np.isnan(arr).any(axis=1)
    if nan_rows.any():
        arr[nan_rows] = np.nan_to_num(arr[nan_rows])
    return arr


def _tensor_numpy64(np: Any, t: Any) -> Any:
    """A CPU tensor as float64 numpy (dtypes numpy lacks go through torch's exact conversion)."""
    if str(t.dtype) in ("torch.bfloat16", "torch.complex32") or "float8" in str(t.dtype):
        t = t.to(dtype=__import__("torch").float64)
    with np.errstate(invalid="ignore"):  # a signalling NaN (uninitialised memory a kernel logged) stays a NaN
        return np.asarray(t.numpy(), dtype=np.float64)


def _finder(names: Any) -> Callable[[tuple], list[str]]:
    find = getattr(names, "find", None)
    if callable(find):
        return find
    from ..numerics.match import HandleNameIndex

    return HandleNameIndex(names).find


class ElementwiseMetric(NumericalComparatorBase):
    """The shape the built-in metrics share: a float64 difference, then one reduction.

    :meth:`element_compare` silences numpy's floating-point warnings (``inf - inf`` and ``0/0`` give
    nan / inf, as in torch), aligns the pair (:func:`aligned_pair`) and names the metric when the
    shapes cannot be compared. Subclasses implement :meth:`_reduce`, and ``_rowwise`` for batching.
    """

    def element_compare(self, a: Any, b: Any) -> float:
        import numpy as np

        with np.errstate(all="ignore"):
            return self._compare(np, a, b)

    def _compare(self, np: Any, a: Any, b: Any) -> float:
        x, y = aligned_pair(a, b)
        try:
            d = x - y
        except ValueError as exc:
            raise ValueError(f"{self.name}: cannot compare shapes {x.shape} and {y.shape}: {exc}") from exc
        return self._reduce(np, x, d)

    def _reduce(self, np: Any, x: Any, d: Any) -> float:
        """The metric from the reference ``x`` and the difference ``d = x - y`` (float64 arrays)."""
        raise NotImplementedError

