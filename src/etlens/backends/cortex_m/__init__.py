"""Arm Cortex-M (CMSIS-NN kernels): the whole program rewritten by CortexMPassManager, no delegate.

* ``build.py`` — quantizer, pass list, edge config and channels-last inputs for ``--backend cortex_m``.
"""

from etlens.backends import Backend, register

BACKEND = register(Backend(
    name="cortex_m",
    builds=("cortex_m",),
    label="Arm Cortex-M",
    rank=30,
    hooks={"build": "etlens.backends.cortex_m.build:config"},
))
