"""The numbers of the fleet dashboard (``etlens report --dataset``), read from a dataset; the page is
drawn by :func:`etlens.views.fleet_pages.dashboard_html`.

Example::

    from etlens.fleet.dashboard import dashboard_data
    from etlens.views.fleet_pages import dashboard_html
    open("fleet.html", "w").write(dashboard_html(dashboard_data("fleet")))
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DashboardData", "dashboard_data"]


@dataclass
class DashboardData:
    """What the dashboard shows: run counts, latency per (device, build), the last two builds' regressions,
    the slowest ops."""

    dataset: str
    #: ``(events, files, devices, builds)``
    counts: tuple[int, int, int, int]
    #: the builds in name order
    builds: list[str]
    #: ``(device, build, latency samples in ms)`` per group, sorted by device then build
    latency: list[tuple[str, str, Any]]
    #: the slowest ops (rows of the ``ops`` view, p50 descending)
    slow: list[dict[str, Any]]
    top: int = 20
    #: ``(build A, build B)``: the last two builds, compared (None with fewer than two builds)
    last_two: tuple[str, str] | None = None
    #: the ops that regressed from ``last_two[0]`` to ``last_two[1]`` (compare rows)
    regressions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The dataset directory's name."""
        return os.path.basename(os.path.normpath(self.dataset))


def dashboard_data(dataset: str, top: int = 20) -> DashboardData:
    """Read ``dataset`` (written by ``etlens collect``) into :class:`DashboardData`: latency per device and
    build, the regressions between the last two builds (sorted by name), the ``top`` slowest ops."""
    from .compare import Side, compare
    from .sql import duckdb_connection

    con = duckdb_connection(dataset)
    lat = con.execute("SELECT coalesce(device, '?') AS device, coalesce(build, '?') AS build, latency_ms FROM runs "
                      "WHERE latency_ms IS NOT NULL ORDER BY device, build").df()
    counts = con.execute("SELECT count(*) AS events, count(DISTINCT file) AS files, count(DISTINCT device) AS devices,"
                         " count(DISTINCT build) AS builds FROM events").fetchone()
    builds = [r[0] for r in con.execute("SELECT DISTINCT build FROM events WHERE build IS NOT NULL ORDER BY build"
                                        ).fetchall()]
    slow = con.execute(f"SELECT event_name, module_path, device, build, count, p10_ms, p50_ms, p90_ms FROM ops "
                       f"ORDER BY p50_ms DESC LIMIT {int(top)}").df().to_dict("records")
    latency = [(d, b, g["latency_ms"].to_numpy()) for (d, b), g in lat.groupby(["device", "build"], sort=True)]
    data = DashboardData(dataset=dataset, counts=tuple(counts), builds=builds, latency=latency, slow=slow, top=top)
    if len(builds) >= 2:
        a, b = builds[-2], builds[-1]
        qa, qb = a.replace("'", "''"), b.replace("'", "''")
        res = compare(Side.of_dataset(dataset, f"build = '{qa}'"), Side.of_dataset(dataset, f"build = '{qb}'"))
        data.last_two = (a, b)
        data.regressions = [r for r in res["rows"] if r["verdict"] == "regression"]
    return data
