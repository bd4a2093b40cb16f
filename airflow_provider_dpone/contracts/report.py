"""Evidence of one run: what was decided, moved and committed, per partition."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PartitionOutcome(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    partition_id: str
    label: str
    decision: str
    reason: str
    status: str
    rows: int = 0
    bytes: int = 0
    seconds: float = 0.0
    digest: str | None = None


#: The reason of a passed comparison only one scope measured (shown in the run's report and output).
COMPARED_NOTHING = (
    "compared nothing: only one scope measured it (load: direct without durable_quality_replay)"
)


class QualityCheckOutcome(BaseModel):
    """One quality check's result. ``values`` are the exact metrics it compared, keyed
    ``scope.metric[.column]``; an ``unavailable`` warn-only result has an explicitly empty set."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    check: str
    columns: tuple[str, ...] = ()
    severity: str
    status: str
    reason: str | None = None
    values: dict[str, int] = Field(default_factory=dict)


class QualitySummary(BaseModel):
    """The run's quality outcome (checks from the manifest; durable replay when selected)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    durable_replay: bool
    verdict: str
    operation_id: str | None = None
    capsule_state: str | None = None
    replayed: bool = False
    checks: tuple[QualityCheckOutcome, ...] = ()
    unverified_partitions: int = 0


class RunReport(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    manifest_name: str
    route: str
    run_id: str
    export: str
    load: str
    checkpoint_batch_id: str | None
    partitions: tuple[PartitionOutcome, ...]
    rows_committed: int = 0
    partitions_committed: int = 0
    partitions_skipped: int = 0
    seconds: float = Field(default=0.0, ge=0)
    quality: QualitySummary | None = None
    #: facts about a run that went on which the operator should know (an identity change on a replacing
    #: route, an append into a non-empty table that was allowed); safe text, no values
    notices: tuple[str, ...] = ()

    def idle_reason(self) -> str | None:
        """Why the run moved nothing (None: it moved partitions or replayed quality), for the CLI and the
        task log alike: "the source holds no rows" must not read like "already loaded"."""
        if any(p.decision == "run" for p in self.partitions) or (self.quality and self.quality.replayed):
            return None
        if not self.partitions:
            return "nothing to do: the source holds no rows to plan a partition from"
        if any(p.reason == "open_partition" for p in self.partitions):
            return "nothing to move now: the rest is committed or still open"
        return "nothing to do: every partition is already committed"


#: The logger each notice is written to, once, as the run makes it (``note: <text>``): an Airflow task log
#: keeps it even when the run fails afterwards, and the CLI prints it from there. Presenters of a report must
#: not repeat ``RunReport.notices`` in a log that already holds this logger's records.
NOTICE_LOGGER = "airflow_provider_dpone.notices"
