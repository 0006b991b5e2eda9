"""Resolve ``--model`` specs: a demo name, ``package.module:attr`` or ``path/to/file.py:attr``.

``attr`` may be a function returning ``(model, example_inputs)`` (the recommended form), a function
or class returning an ``nn.Module``, or an ``nn.Module`` instance. Example inputs then come from the
module's ``example_inputs`` attribute, a module-level ``example_inputs``/``EXAMPLE_INPUTS``, or
``--input-shape`` (random float tensors).

Example::

    model, inputs, name = load_model("cnn")                       # demo
    model, inputs, name = load_model("models.py:build")           # build() -> (model, inputs)
    model, inputs, name = load_model("torchvision.models:mobilenet_v2", ["1,3,224,224"])
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

from ..errors import EtlensError, MissingDataError

__all__ = ["load_model"]


def _import_file(path: str) -> Any:
    if not os.path.exists(path):
        raise MissingDataError(f"{path}: no such file (--model expects path/to/file.py:ATTR)")
    mod_name = f"_etlens_user_{abs(hash(os.path.abspath(path)))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise EtlensError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def _shapes(specs: list[str]) -> tuple:
    import torch

    out = []
    for s in specs:
        try:
            out.append(torch.randn(*[int(d) for d in s.replace("x", ",").split(",") if d.strip()]))
        except ValueError:
            raise EtlensError(f"--input-shape {s!r}: expected comma-separated integers such as 1,3,224,224") from None
    return tuple(out)


def load_model(spec: str, input_shapes: list[str] | None = None) -> tuple[Any, tuple, str]:
    """``(model, example_inputs, name)`` for a ``--model`` value."""
    from ..demos import DEMOS, get_demo

    if spec in DEMOS:
        model, inputs = get_demo(spec)
        return model, inputs, spec
    if ":" not in spec:
        raise EtlensError(f"--model {spec!r}: not a demo ({', '.join(DEMOS)}) and not MODULE:ATTR or "
                          "path/to/file.py:ATTR")
    where, attr = spec.rsplit(":", 1)
    if where.endswith(".py") or os.sep in where:
        module = _import_file(where)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise EtlensError(f"--model {spec!r}: cannot import module {where!r} ({exc})") from exc
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise EtlensError(f"--model {spec!r}: {where} has no attribute {attr!r}") from None

    import torch

    inputs: tuple | None = None
    if isinstance(obj, torch.nn.Module):
        model = obj
    elif callable(obj):
        made = obj()
        if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
            model, inputs = made
        elif isinstance(made, torch.nn.Module):
            model = made
        else:
            raise EtlensError(f"--model {spec!r}: {attr}() returned {type(made).__name__}; expected "
                              "(nn.Module, example_inputs) or an nn.Module")
    else:
        raise EtlensError(f"--model {spec!r}: {attr} is a {type(obj).__name__}, not a module or a function")
    if input_shapes:
        inputs = _shapes(input_shapes)
    if inputs is None:
        inputs = getattr(model, "example_inputs", None) or getattr(module, "example_inputs", None) or getattr(
            module, "EXAMPLE_INPUTS", None)
    if inputs is None:
        raise MissingDataError(f"--model {spec!r}: no example inputs; return (model, inputs) from {attr}(), define "
                               "example_inputs, or pass --input-shape 1,3,224,224")
    if not isinstance(inputs, tuple):
        inputs = tuple(inputs) if isinstance(inputs, list) else (inputs,)
    if hasattr(model, "eval"):
        model = model.eval()
    return model, inputs, attr
