"""Readers: one module per format, all producing :mod:`etlens.model` objects.

Use :func:`read` for a file of any supported kind; the format is chosen by its magic bytes.
"""

from .base import Artifact
from .registry import READERS, ReaderSpec, read, read_object, sniff

__all__ = ["Artifact", "READERS", "ReaderSpec", "read", "read_object", "sniff"]
