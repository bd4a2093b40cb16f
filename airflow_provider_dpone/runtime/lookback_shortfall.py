"""What a ``replace_partition`` run says when its lookback found fewer rows than a partition's commit recorded.

A lookback replaces a committed partition with what the source holds there now. Fewer rows than the commit
recorded means rows were deleted at the source, or moved to another partition by an update of the partition
column. A row moved into a partition the run also moves is loaded there; one moved into a committed partition
the lookback no longer reaches is not: the replacement deleted it from its old partition and no run reads its
new one again (seen: a row moved from day 5, within a lookback of 2, to committed day 2: gone from the target,
exit 0, no word; ``dpone checkpoints --verify`` showed day 2 drifted). Counts of the lookback alone cannot
tell a delete from such a move, so the run goes on and says where to look and how to repair it.

Counts only, so not every such move is seen: where the partition also gained at least as many rows since
its commit as moved out (a late row), its count did not fall and no notice is given, while the moved row is
gone all the same (seen: day 5 lost row 5 to committed day 2 and gained a late row: exit 0, no word). Only
``--verify`` finds it then (day 2 drifted); the guide and runbook say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.runtime.pre_arm.context import some_bounds_labels
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision


def shrunk_by_lookback(
    decisions: Sequence[ResumeDecision],
    replaced: Mapping[str, PartitionCheckpoint],
    committed: Iterable[PartitionCheckpoint],
) -> list[tuple[PartitionBounds, int]]:
    """The bounds of each lookback partition this run committed with fewer rows than the commit it replaced
    (``replaced``: the stored checkpoint each decision was taken from), with how many fewer, in plan order.
    A commit that recorded no row count (an older release's) is left out: nothing to compare."""
    now = {c.partition_id: c.rows for c in committed if c.status is CheckpointStatus.COMMITTED}
    shrunk: list[tuple[PartitionBounds, int]] = []
    for decision in decisions:
        if decision.action is not Action.RUN or decision.reason is not Reason.LOOKBACK:
            continue
        pid = decision.partition.partition_id
        before = replaced.get(pid)
        rows = now.get(pid)
        if before is None or before.status is not CheckpointStatus.COMMITTED or before.rows is None:
            continue
        if rows is not None and rows < before.rows:
            shrunk.append((decision.partition.bounds, before.rows - rows))
    return shrunk


def shrunk_notice(
    route: RouteIdentity,
    column: str | None,
    shrunk: Sequence[tuple[PartitionBounds, int]],
    target_table: str,
    manifest_ref: str,
) -> str | None:
    """The notice for :func:`shrunk_by_lookback`'s partitions (None when there are none): which, how many
    rows fewer, what that may mean, the command that finds a lost row and the run that reloads it."""
    if not shrunk:
        return None
    fewer = sum(n for _, n in shrunk)
    moved = f"an update of {column}" if column else "an update of the partition column"
    return (
        f"route {route.describe()}: {len(shrunk)} partition(s) the lookback replaced hold fewer rows at the "
        f"source than their commit recorded ({some_bounds_labels([b for b, _ in shrunk])}; {fewer:,} row(s) "
        f"fewer): rows were deleted at the source or moved to another partition ({moved}). A row moved into "
        f"a committed partition outside the lookback is not in {target_table} now: this run deleted it with "
        "its old partition and no run reads its new one again. "
        f"`dpone checkpoints {manifest_ref} --verify` shows such a partition DRIFTED (more source rows than "
        "committed); reload it with one run whose source.partitioning.lookback reaches it "
        "(`dpone runbook guard`, 'Drifted partitions')"
    )
