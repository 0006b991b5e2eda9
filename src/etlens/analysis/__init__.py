"""Analyses over the shared model: inspector, numerics, delegation, attribution (time inside delegates per node)."""
