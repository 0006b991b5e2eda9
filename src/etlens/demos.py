"""The built-in demo models (``etlens demos``), public as ``etlens.demos``.

They live in :mod:`etlens.builder.demos` (the pass tracer, the report pipeline and ``--model``
resolve demo names there); this module re-exports them for users and scripts::

    from etlens.demos import get_demo
    model, inputs = get_demo("cnn")
"""

from __future__ import annotations

from .builder.demos import *  # noqa: F401,F403
from .builder.demos import __all__  # noqa: F401
