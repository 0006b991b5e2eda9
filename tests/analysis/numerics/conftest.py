"""Fixtures of the numerics tests: ``both(case)`` gives ExecuTorch's and etlens' Inspector on one artifact."""

from __future__ import annotations

from tests.analysis.numerics._et import both

__all__ = ["both"]
