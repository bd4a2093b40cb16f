"""The quality checks of one batch inside a run: measured before extraction and before publication.

* before extraction: the policy's columns exist in the read, the source can be profiled (and, on the
  staged path, the staging table summarized), then the source probe over the union of the batch;
* before arming: the staged probe, then the verdict over source, staged and the rows extracted; a failed
  required check stops the batch before the target is invoked;
* after publication (no durable replay): the verdict again with the rows that actually streamed, which
  on the lazy direct path are known only then.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.capsule import ProbeEvidence, ProbeScope, QualityPolicy
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.contracts.target_observation import ObservationMetric
from airflow_provider_dpone.ports.source import ProfilingSource, Source
from airflow_provider_dpone.runtime.quality.evidence import (
    ColumnSummarizer,
    MetricMap,
    ScopeMetrics,
    measure_source,
    measure_staged,
    to_probe,
)
from airflow_provider_dpone.runtime.quality.generation import merge_bounds
from airflow_provider_dpone.runtime.quality.policy import metric_keys, plan_columns
from airflow_provider_dpone.runtime.quality.verdict import Verdict, evaluate


class QualityGate:
    def __init__(self, policy: QualityPolicy, route: str) -> None:
        self.policy = policy
        self.route = route
        self.keys = metric_keys(policy)
        self.columns = plan_columns(policy)
        self.source: MetricMap | None = None
        self.staged: MetricMap | None = None

    # -- before extraction -------------------------------------------------------------------------------

    def require_measurable(self, schema: TableSchema, source: Source, staged_sink: object | None) -> None:
        """Refuse, before any extraction, checks that cannot be measured exactly."""
        for column in self.columns:
            if column not in schema.names:
                raise DponeError(
                    ErrorCode.MANIFEST_INVALID,
                    f"quality check column {column!r} is not a column the source read returns",
                    details={"column": column, "path": "quality.checks"},
                )
        if not callable(getattr(source, "profile", None)):
            raise DponeError(ErrorCode.USAGE, "this source cannot measure quality metrics")
        if staged_sink is not None and not callable(getattr(staged_sink, "column_summary", None)):
            raise DponeError(ErrorCode.USAGE, "this sink cannot measure the staging table's quality metrics")

    def measure_source(self, source: Source, bounds: Sequence[PartitionBounds]) -> None:
        profiling: ProfilingSource = source  # type: ignore[assignment]  # checked by require_measurable
        self.source = measure_source(profiling, merge_bounds(bounds), self.columns, self.keys)

    # -- before arming -----------------------------------------------------------------------------------

    def measure_staged(self, sink: object, staging_table: str) -> None:
        summarizer: ColumnSummarizer = sink  # type: ignore[assignment]  # checked by require_measurable
        self.staged = measure_staged(summarizer, staging_table, self.columns, self.keys)

    def verdict(self, moved_rows: int | None) -> Verdict:
        if self.source is None:
            raise DponeError(ErrorCode.QUALITY_CHECK_FAILED, "the source quality probe is missing")
        scopes = [ScopeMetrics("source", self.source)]
        if self.staged is not None:
            scopes.append(ScopeMetrics("staged", self.staged))
        if moved_rows is not None:
            scopes.append(ScopeMetrics("moved", {(ObservationMetric.ROW_COUNT, None): moved_rows}))
        verdict = evaluate(self.policy, scopes)
        verdict.log_warnings(self.route)
        return verdict

    def probes(self) -> tuple[ProbeEvidence, ...]:
        if self.source is None:
            raise DponeError(ErrorCode.QUALITY_CHECK_FAILED, "the source quality probe is missing")
        probes = [to_probe(ProbeScope.SOURCE, self.source)]
        if self.staged is not None:
            probes.append(to_probe(ProbeScope.STAGED, self.staged))
        return tuple(probes)
