"""What a run says when the source gives a replacing route no rows.

An empty source is handled two ways, by design: a partitioned route plans no partition from it, so nothing
is replaced and the target keeps what earlier runs committed (an empty source is as likely a reload in
progress as a deliberate truncate: ``vanished.py``); a route without partitioning plans its one partition,
reads no rows and replaces the target with them. Both went on without a word (the first even printed that
every partition was already committed). A replacing route is one whose target is meant to mirror the
source, so either outcome is a fact the operator must see: these are the notices that say it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

_REPLACING = (Strategy.FULL_REFRESH, Strategy.REPLACE_PARTITION)


def nothing_planned(
    route: RouteIdentity, own: Iterable[PartitionCheckpoint], target_table: str, manifest_ref: str
) -> str | None:
    """The notice for a replacing route whose source planned no partition while the target holds commits
    (``None`` otherwise: an append route keeps its rows whatever the source holds)."""
    if route.strategy not in _REPLACING:
        return None
    if not any(c.status is CheckpointStatus.COMMITTED for c in own):
        return None
    return (
        f"the source of route {route.describe()} holds no rows its partitioning places: no partition was "
        f"planned, nothing was replaced, and {target_table} keeps every row earlier runs committed (an "
        "empty source is never copied as an empty target by a partitioned route: it is as likely a reload "
        f"in progress). Check the source; if the target must be emptied, do it by hand "
        f"(`dpone checkpoints {manifest_ref} --verify` compares both sides)"
    )


def refresh_emptied(route: RouteIdentity, rows_moved: Mapping[str, int], target_table: str) -> str | None:
    """The notice for a full refresh that committed its partitions with no row at all (``None`` when any
    row moved, or the route does not replace its whole table)."""
    if route.strategy is not Strategy.FULL_REFRESH or not rows_moved or any(rows_moved.values()):
        return None
    return (
        f"the full refresh of route {route.describe()} read no rows from the source: {target_table} is now "
        "empty. If the source was being reloaded, run the route again once it holds its rows"
    )
