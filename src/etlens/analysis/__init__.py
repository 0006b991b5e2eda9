"""Analyses over the shared model: inspector, numerics, delegation."""
