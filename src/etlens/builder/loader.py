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

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from typing import Any

from ..errors import EtlensError, MissingDataError

__all__ = ["load_model", "model_title", "ModelError", "user_code"]


class ModelError(EtlensError):
    """The user's model (or export/quantization of it) raised: the message names the stage and the user's frame."""


def _user_frame(exc: BaseException) -> str | None:
    """``file:line in func`` of the innermost traceback frame outside Python, torch and etlens (the user's code)."""
    skip = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(os.__file__)]
    skip += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        path = os.path.abspath(fr.filename)
        if fr.filename.startswith("<") or any(path.startswith(d + os.sep) for d in skip if d):
            continue
        return f"{fr.filename}:{fr.lineno} in {fr.name}"
    return None


class user_code:
    """``with user_code("export", "build"):`` turns any non-etlens exception into a :class:`ModelError`.

    The message reads ``export of build() failed at export: TypeError: … (models.py:12 in forward)``:
    the stage, the error, and the innermost frame of the user's own code.
    """

    def __init__(self, stage: str, name: str):
        self.stage, self.name = stage, name

    def __enter__(self) -> None:
        return None

    def __exit__(self, etype: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or isinstance(exc, (EtlensError, KeyboardInterrupt)) or not isinstance(exc, Exception):
            return False
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        where = _user_frame(exc)
        hint = next((h for key, h in _HINTS if key in msg), "")
        raise ModelError(f"export of {self.name}() failed at {self.stage}: {type(exc).__name__}: {msg}"
                         + (f" ({where})" if where else "") + (f"; {hint}" if hint else "")) from exc


#: ``(text in the error, what to do)``: causes of export failures that users of one library share
_HINTS = (
    ("cache_utils.", "the model returns its key/value cache (a Hugging Face model with use_cache on): build it "
                     "with config.use_cache=False or return only the tensors a deployed program needs"),
)


def _import_file(path: str) -> Any:
    if not os.path.exists(path):
        raise MissingDataError(f"{path}: no such file (--model expects path/to/file.py:ATTR)")
    # a stable name (str hash() changes per process): it shows in traces' module paths and stack frames, and
    # `trace --no-times` promises byte-identical output for the same model
    mod_name = "_etlens_user_" + hashlib.sha1(os.path.abspath(path).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise EtlensError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    with user_code("import", os.path.basename(path)):
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
    from .demos import DEMOS, get_demo

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
        with user_code("build", attr):
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
    from .inputs import check_inputs

    inputs = check_inputs(inputs, f"--model {spec!r}: example inputs")  # nested tuples/lists/dicts are kept
    if hasattr(model, "eval"):
        model = model.eval()
    return model, inputs, attr


#: class names that say nothing about the model: the title falls back to the file or module name
_GENERIC = {"Module", "GraphModule", "Sequential", "ModuleList", "ModuleDict", "ExportedProgram"}


def model_title(model: Any, spec: str) -> str:
    """A human name for the model ``spec`` built: the demo name, else the module's class, else the file stem.

    ``model_title(GPT2LMHeadModel(cfg), "models.py:build")`` is ``"GPT2LMHeadModel"``; a bare
    ``nn.Sequential`` from ``my_net.py:build`` is ``"my_net"``; ``"cnn"`` (a demo) stays ``"cnn"``.
    Report titles use it, so a report of ``build()`` is not titled "build".
    """
    from .demos import DEMOS

    if spec in DEMOS:
        return spec
    cls = type(model).__name__
    if cls and cls not in _GENERIC and not cls.startswith("_"):
        return cls
    where = spec.rsplit(":", 1)[0]
    if where.endswith(".py") or os.sep in where:
        return os.path.splitext(os.path.basename(where))[0]
    return where.rsplit(".", 1)[-1]
