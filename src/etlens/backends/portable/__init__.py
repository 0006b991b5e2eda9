"""The portable kernels: ExecuTorch's own operator library, nothing delegated.

No delegate id (nothing to decode): only ``build.py``, the ``--backend portable`` flow.
"""

from etlens.backends import Backend, register

BACKEND = register(Backend(
    name="portable",
    builds=("portable",),
    label="portable kernels",
    rank=20,
    hooks={"build": "etlens.backends.portable.build:config"},
))
