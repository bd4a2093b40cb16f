"""Exact metrics per scope: measured on the source and the staging table, recorded, compared.

A scope's metrics are a map ``(metric, column) -> count`` holding exactly the policy's keys. Anything
else — a missing or extra key, a value that is not a non-negative integer — is malformed evidence and
fails closed; it is never read as "unavailable".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_dpone.contracts.capsule import ProbeEvidence, ProbeScope
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.target_observation import (
    METRIC_VALUE_MAX,
    MetricValue,
    ObservationMetric,
    ObservationStatus,
    TargetObservation,
)
from airflow_provider_dpone.ports.source import ProfilingSource
from airflow_provider_dpone.runtime.quality.policy import MetricKey

MetricMap = dict[MetricKey, int]


class ColumnSummarizer(Protocol):
    """The sink's read-only summary of a table (the staging table here); ``ClickHouseSink`` has it."""

    def column_summary(
        self, table: str, bounds: PartitionBounds | None, columns: Sequence[str]
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ScopeMetrics:
    """One scope's measurements; ``values`` is None only for an explicitly unavailable target."""

    scope: str
    values: Mapping[MetricKey, int] | None


def key_label(scope: str, key: MetricKey) -> str:
    metric, column = key
    return f"{scope}.{metric.value}" + (f".{column}" if column else "")


def from_summary(summary: Mapping[str, Any], keys: Sequence[MetricKey], *, scope: str) -> MetricMap:
    """``{"rows", "null_counts", "distinct_counts"}`` (source profile or sink summary) -> the keys' map."""
    values: MetricMap = {}
    try:
        for metric, column in keys:
            if metric is ObservationMetric.ROW_COUNT:
                value = summary["rows"]
            elif metric is ObservationMetric.NULL_COUNT:
                value = summary["null_counts"][column]
            else:
                value = summary["distinct_counts"][column]
            values[(metric, column)] = _count(value, scope)
    except (KeyError, TypeError) as exc:
        raise _malformed(scope) from exc
    return values


def _count(value: object, scope: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= METRIC_VALUE_MAX:
        raise _malformed(scope)
    return value


def _malformed(scope: str) -> DponeError:
    return DponeError(
        ErrorCode.QUALITY_CHECK_FAILED,
        f"the {scope} quality metrics are incomplete or malformed; nothing is accepted in their place",
        details={"scope": scope},
    )


def measure_source(
    source: ProfilingSource,
    bounds: Sequence[PartitionBounds],
    columns: Sequence[str],
    keys: Sequence[MetricKey],
) -> MetricMap:
    return from_summary(source.profile(bounds, columns), keys, scope="source")


def measure_staged(
    sink: ColumnSummarizer, staging_table: str, columns: Sequence[str], keys: Sequence[MetricKey]
) -> MetricMap:
    return from_summary(sink.column_summary(staging_table, None, columns), keys, scope="staged")


def to_probe(scope: ProbeScope, values: Mapping[MetricKey, int]) -> ProbeEvidence:
    return ProbeEvidence(
        scope=scope,
        partition_id=None,
        metrics=tuple(
            MetricValue(metric=metric, column=column, value=values[(metric, column)])
            for metric, column in sorted_keys(list(values))
        ),
    )


def from_probe(probe: ProbeEvidence, keys: Sequence[MetricKey]) -> MetricMap:
    """A recorded probe's map; it must hold exactly ``keys`` once each (else ``quality_capsule_invalid``)."""
    found = [m.key() for m in probe.metrics]
    if sorted(found, key=_order) != sorted(keys, key=_order) or len(set(found)) != len(found):
        raise DponeError(
            ErrorCode.CAPSULE_INVALID,
            f"the recorded {probe.scope.value} evidence does not hold exactly the policy's metrics",
            details={"scope": probe.scope.value},
        )
    return {m.key(): m.value for m in probe.metrics}


def from_observation(observation: TargetObservation) -> MetricMap | None:
    """The target's map, or None for an explicitly unavailable (warn-only) observation."""
    if observation.status is ObservationStatus.UNAVAILABLE:
        return None
    return {m.key(): m.value for m in observation.metrics}


def sorted_keys(keys: Sequence[MetricKey]) -> list[MetricKey]:
    return sorted(keys, key=_order)


def _order(key: MetricKey) -> tuple[str, str]:
    return (key[0].value, key[1] or "")
