"""Numerical debugger: where the runtime's numbers drift from the reference (public surface).

Everything a caller needs is re-exported here from :mod:`.api`; the steps behind it live in their
own modules of this package:

* :mod:`.capture` — run the ETRecord's reference program and record each node's output;
* :mod:`.jsonrun` — the fast path: run the reference straight from the ETRecord's program JSON (its
  arguments decoded by :mod:`etlens.readers.export_args`, its constant tensors read without
  ``torch.load`` by :mod:`etlens.readers.torch_save`);
* :mod:`.runtime` — pick the runtime's intermediate outputs out of the Inspector's events;
* :mod:`.match` — pair reference and runtime outputs through their debug handles;
* :mod:`.delegates` — which node each output of a delegate call is (the partition's boundary);
* :mod:`.explain` — say why an op or event found no partner.

Example::

    from etlens.analysis.numerics import calculate_numeric_gap, first_divergence
    df = calculate_numeric_gap(inspector, "SNR")
"""

from .api import (
                  DELEGATE_OUTPUT_CHOICES,
                  GAP_COLUMNS,
                  KEEP_CHOICES,
                  METRIC_NAMES,
                  Divergence,
                  NumericalAnalysis,
                  analyze,
                  calculate_numeric_gap,
                  explain_unpaired,
                  first_divergence,
)

__all__ = ["calculate_numeric_gap", "explain_unpaired", "first_divergence", "analyze", "NumericalAnalysis",
           "Divergence", "GAP_COLUMNS", "METRIC_NAMES", "KEEP_CHOICES",
           "DELEGATE_OUTPUT_CHOICES"]
