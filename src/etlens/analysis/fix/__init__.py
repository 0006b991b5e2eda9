"""``etlens fix``: from "where the numbers drift" to "what to keep in float", verified by re-lowering.

:func:`~etlens.analysis.fix.search.fix_model` ranks the quantized clusters by *introduced* error
(:mod:`etlens.analysis.numerics.introduced`), simulates keep-in-float candidates in PyTorch (the
pt2e QDQ graph, no lowering), lowers and runs the few worth verifying in the build session's warm
child, and returns the table, the Pareto front and the chosen :class:`~etlens.builder.recipe.Recipe`.
"""

from .search import Candidate, FixResult, fix_model

__all__ = ["Candidate", "FixResult", "fix_model"]
