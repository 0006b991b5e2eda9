"""Fleet analytics: many runs on many devices and builds → one columnar dataset → SQL and verdicts.

* :func:`collect` (``etlens collect``): ETDumps → rows of a Parquet dataset (:mod:`.columns`), appended,
  streamed, in parallel processes; bad files skipped with a reason.
* :mod:`.sql` (``etlens query``): DuckDB over the views ``events``, ``runs``, ``ops``; :mod:`.spark` runs
  the same views and SQL on Apache Spark and ingests on a cluster.
* :func:`compare` (``etlens compare``): per op and per module, A vs B with a statistical verdict
  (:mod:`.stats`); :mod:`.dashboard` gathers the fleet dashboard's numbers (``etlens report --dataset``).
  The pages of both are drawn by :mod:`etlens.views.fleet_pages`.

Nothing here needs torch: the dataset is built by etlens' own ETDump/ETRecord readers.
"""

from __future__ import annotations

from .compare import Side, compare
from .ingest import CollectResult, collect
from .sql import query

__all__ = ["collect", "CollectResult", "query", "compare", "Side"]
