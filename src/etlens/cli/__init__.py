"""The ``etlens`` command line; the entry point is :func:`etlens.cli.main.main`."""
