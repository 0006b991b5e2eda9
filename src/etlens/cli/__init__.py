"""The ``etlens`` command line (see :mod:`etlens.cli.main`)."""

from .main import main

__all__ = ["main"]
