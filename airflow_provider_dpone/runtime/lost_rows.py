"""What the lost-rows stop (``target_lost_committed_rows``) checks on a replayed run, and what it tells.

A retry of a completed run ID under durable quality replay reports that run from its capsule and reads
nothing of the source (ADR 0074), so it plans nothing either. It still skips every committed partition of
the route, as a retry without replay does, and must not report success over a target that lost their
rows (seen: a DBA's TRUNCATE between the run and its retry, exit 0, ``quality: passed`` on an empty table):
:func:`replayed_as_skipped` gives the check the route's commits as a plan that skips them all, from the
checkpoints alone.

A TTL a DBA added after rows were committed expires them; the stop then sent on-call to restore or reload
the table, which the TTL expires again. :func:`lost_rows_hints` names it when the table has one.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.ports.sink import Sink, TtlReportingSink
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision
from airflow_provider_dpone.runtime.route_family import RouteFamily
from airflow_provider_dpone.runtime.vanished import as_planned


def replayed_as_skipped(
    family: RouteFamily, replayed: Sequence[PartitionCheckpoint], strategy: Strategy
) -> tuple[list[ResumeDecision], dict[str, PartitionCheckpoint]]:
    """The route's committed partitions under the definitions (query and schema hash) of the replayed
    run's own checkpoints (``replayed``), each skipped, and the checkpoint each was taken from: what a retry
    without replay skips, as far as the checkpoints tell it without the source. One per bounds, the latest
    (a partition stored under an older spelling of the route counts once). A ``full_refresh`` replaces the
    whole table: only the replayed run's own partitions are what it holds (an older refresh's day the
    source has lost since is in no plan, and counted it stopped a replay over an intact table)."""
    definitions = {(c.query_hash, c.schema_hash) for c in replayed}
    latest: dict[str, PartitionCheckpoint] = {}
    for checkpoint in replayed if strategy is Strategy.FULL_REFRESH else family.own:
        if checkpoint.status is not CheckpointStatus.COMMITTED:
            continue
        if (checkpoint.query_hash, checkpoint.schema_hash) not in definitions:
            continue
        label = checkpoint.bounds.label
        kept = latest.get(label)
        if kept is None or checkpoint_moment(checkpoint) > checkpoint_moment(kept):
            latest[label] = checkpoint
    decisions = [ResumeDecision(as_planned(c), Action.SKIP, Reason.COMMITTED) for c in latest.values()]
    return decisions, {c.partition_id: c for c in latest.values()}


def deleting_ttl(sink: Sink, table: str) -> bool:
    """Whether ``table`` has a TTL that deletes rows, read-only through the sink when it can tell
    (``TtlReportingSink``). A failure to read it is no answer: the stop it would explain is raised all the
    same (False), never replaced by the failure."""
    if not isinstance(sink, TtlReportingSink):
        return False
    try:
        return sink.deleting_ttl(table)
    except Exception:  # the stop being raised is the run's error, never this read's
        return False


def lost_rows_hints(table: str, *, ttl: bool, replayed: str | None) -> tuple[str, ...]:
    """The hint lines of the lost-rows stop: a replayed run ID says why it is no success, a TTL that
    deletes rows is named before the remedies it would undo."""
    lines = ["nothing was read or written; the guard never reloads committed partitions on a guess"]
    if replayed is not None:
        lines.append(
            f"this retry of run {replayed!r} would have been reported from its kept quality evidence, reading "
            "nothing from the source and moving nothing; while the target lacks the rows the route committed, "
            "it is not reported as a success"
        )
    if ttl:
        lines.extend(
            (
                f"target table {table} has a TTL that deletes rows once they expire: it may have expired these, "
                "and it expires a restored or reloaded copy again: take it off first (ALTER TABLE ... REMOVE "
                "TTL), or load only partitions younger than its horizon (a retention table, "
                "sink.options.allow_target_ttl)",
                "runbook:  dpone runbook guard (section 'A TTL on the target')",
            )
        )
    lines.extend(
        (
            "a checkpoint store serves one environment: another one (a staging copy) writing through it "
            "commits partitions this target never received",
            "restore the target table, or reload deliberately: see `dpone runbook guard`, "
            "'The target lost committed rows'",
        )
    )
    return tuple(lines)
