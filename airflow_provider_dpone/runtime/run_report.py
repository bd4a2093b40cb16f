"""The run report: what one run decided and did, per partition, built from its decisions and checkpoints.

Pure functions over what the run holds when it ends (no port is called here), so the report a CLI prints,
the operator logs and a script reads from ``--json`` is the same however the run ended: moved, skipped, or
decided by a sealed capsule without touching the source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.contracts.report import PartitionOutcome, QualitySummary, RunReport
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.runtime.quality.verdict import Verdict
from airflow_provider_dpone.runtime.replay.scan import OperationRecord
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision


def run_report(
    manifest: Manifest,
    route: RouteIdentity,
    run_id: str,
    decisions: Sequence[ResumeDecision],
    *,
    batch_id: str | None,
    committed: Mapping[str, PartitionCheckpoint],
    seconds: float,
    quality: QualitySummary | None,
    partition_seconds: Mapping[str, float],
    notices: Sequence[str],
) -> RunReport:
    """One outcome per decision: a moved partition's from the checkpoint that committed it (its rows, bytes,
    seconds and artifact digest), a skipped one's from its decision."""
    outcomes = []
    for d in decisions:
        cp = committed.get(d.partition.partition_id)
        evidence = cp.diagnostics.get("artifact_sha256") if cp else None
        outcomes.append(
            PartitionOutcome(
                partition_id=d.partition.partition_id,
                label=d.partition.bounds.label,
                decision=d.action.value,
                reason=d.reason.value,
                status=cp.status.value if cp else skipped_status(d),
                rows=(cp.rows or 0) if cp else 0,
                bytes=(cp.bytes or 0) if cp else 0,
                seconds=round(partition_seconds.get(d.partition.partition_id, 0.0), 3) if cp else 0.0,
                digest=evidence if isinstance(evidence, str) else None,
            )
        )
    return RunReport(
        manifest_name=manifest.name,
        route=route.describe(),
        run_id=run_id,
        export=manifest.source.export.value,
        load=manifest.sink.load.value,
        checkpoint_batch_id=batch_id,
        partitions=tuple(outcomes),
        rows_committed=sum(o.rows for o in outcomes if o.decision == "run"),
        partitions_committed=len(committed),
        partitions_skipped=sum(1 for d in decisions if d.action is Action.SKIP),
        seconds=round(seconds, 3),
        quality=quality,
        notices=tuple(notices),
    )


def capsule_report(
    manifest: Manifest,
    route: RouteIdentity,
    run_id: str,
    record: OperationRecord,
    *,
    seconds: float,
    durable: bool,
    replayed: bool,
    notices: Sequence[str] = (),
) -> RunReport:
    """The report of a run decided by its capsule: nothing read from the source, nothing moved."""
    assert record.chain is not None and record.verdict is not None
    reason = "replayed_from_capsule" if replayed else "published_by_earlier_attempt"
    outcomes = tuple(
        PartitionOutcome(
            partition_id=c.partition_id,
            label=c.bounds.label,
            decision=Action.SKIP.value,
            reason=reason,
            status=c.status.value,
            rows=c.rows or 0,
            bytes=c.bytes or 0,
        )
        for c in record.partitions
    )
    return RunReport(
        manifest_name=manifest.name,
        route=route.describe(),
        run_id=run_id,
        export=manifest.source.export.value,
        load=manifest.sink.load.value,
        checkpoint_batch_id=record.chain.core.checkpoint_batch_id,
        partitions=outcomes,
        partitions_skipped=len(outcomes),
        seconds=round(seconds, 3),
        quality=QualitySummary(
            durable_replay=durable,
            verdict=record.verdict.label,
            operation_id=record.operation_id,
            capsule_state="complete",
            replayed=replayed,
            checks=record.verdict.outcomes(),
        ),
        notices=tuple(notices),
    )


def quality_summary(
    verdict: Verdict | None, operation_id: str | None, unverified: int, *, durable: bool, checks: bool
) -> QualitySummary | None:
    """The report's quality part (``None`` for a route with no quality checks and no durable replay)."""
    if verdict is None and not durable and not checks:
        return None
    return QualitySummary(
        durable_replay=durable,
        verdict=verdict.label if verdict is not None else "not_checked",
        operation_id=operation_id,
        capsule_state="complete" if operation_id is not None else None,
        checks=verdict.outcomes() if verdict is not None else (),
        unverified_partitions=unverified,
    )


def skipped_status(decision: ResumeDecision) -> str:
    """A partition this run did not move: COMMITTED when it was, OPEN when settle holds it back."""
    if decision.action is not Action.SKIP:
        return "UNKNOWN"
    return "OPEN" if decision.reason is Reason.OPEN_PARTITION else "COMMITTED"
