"""Arm Ethos-U NPUs (U55, U65, U85) through ExecuTorch's Arm backend and Vela: everything etlens knows.

* ``payload.py`` (readers) — decode the delegate payload, a Vela bin stream (command stream, weights,
  scratch sizes, I/O tables);
* ``vela.py`` (readers) — read the sidecar ``<stem>.vela.json`` etlens writes at compile time (Vela's
  summary and per-layer table per partition, the TOSA operators' origins, the partitioner's CPU reasons);
* ``mapping.py`` (analysis) — Vela's layers -> graph nodes (per-node cycles, memory), per partition;
* ``tosa_values.py`` (analysis) — the values inside the delegate: the TOSA graph run on a reference engine;
* ``memory.py``, ``delegation.py`` (analysis) — the hooks ``etlens memory`` / ``etlens delegation`` /
  ``etlens size`` / ``etlens model-explorer`` call;
* ``numerics.py`` (analysis) — the hook ``etlens gap --inside-delegates`` calls (via ``tosa_values.py``);
* ``build.py`` (builder) — quantizer, partitioner, compile spec, Vela capture and the sidecar writer;
* ``text.py`` (views) — the tables ``etlens memory`` / ``etlens delegation`` print;
* ``page.py`` (report) — the report's Ethos-U page (sections and cards).
"""

from etlens.backends import Backend, register

BACKEND = register(Backend(
    name="ethosu",
    ids=("EthosUBackend", "ArmBackendEthosU"),
    builds=("ethos-u55-128", "ethos-u65-256", "ethos-u85-256"),
    label="Ethos-U",
    rank=40,
    attrs_key="ethos_u",
    hooks={
        "payload": "etlens.backends.ethosu.payload:decode",
        "vela": "etlens.backends.ethosu.vela",
        "memory": "etlens.backends.ethosu.memory",
        "delegation": "etlens.backends.ethosu.delegation",
        "numerics": "etlens.backends.ethosu.numerics",
        "build": "etlens.backends.ethosu.build:config",
        "text": "etlens.backends.ethosu.text",
        "page": "etlens.backends.ethosu.page:report_from_estimates",
    },
))
