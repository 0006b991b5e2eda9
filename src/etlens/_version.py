"""The etlens version, in a module of its own so any layer can name it without importing the facade."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
