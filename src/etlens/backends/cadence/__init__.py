"""Cadence DSPs. etlens builds for them (export/edge stages); no payload decoder yet."""

from etlens.backends import Backend, register

BACKEND = register(Backend(
    name="cadence",
    builds=("cadence",),
    label="Cadence",
    rank=70,
    hooks={"build": "etlens.backends.cadence.build:config"},
))
