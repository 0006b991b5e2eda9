"""Progress bars that show on a terminal and stay silent when output is piped."""

from __future__ import annotations

import sys
from typing import Iterable, TypeVar

__all__ = ["progress"]

T = TypeVar("T")


def progress(iterable: Iterable[T] | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", enabled: bool | None = None):
    """Wrap ``iterable`` in a tqdm bar on stderr when stderr is a terminal, else return a no-op bar."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr,
                leave=False, dynamic_ncols=True)
