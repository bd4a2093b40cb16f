"""Durable quality replay's bounded reader: one ``SupervisedTargetReader().observe(...)`` of a whole generation.

The generation is what one dpone run published: every day partition of the benchmark table (one range per
day, as the run's partitions are). The plan asks for the exact metrics a quality replay needs: row count,
and NULL and distinct counts of two columns. Timed from the reader's construction to its outcome, so the
worker's start-up (a fresh Python process importing clickhouse-connect, and chDB opening its path) and its
verified termination are included.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from clock import Clock


def run_reader(spec: dict[str, Any]) -> dict[str, Any]:
    from airflow_provider_dpone.adapters.target_reader import SupervisedTargetReader
    from airflow_provider_dpone.contracts.endpoints import (
        ClickHouseInterface,
        EndpointDescriptor,
        EndpointKind,
    )
    from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
    from airflow_provider_dpone.contracts.target_observation import (
        GenerationSelector,
        ObservationMetric,
        TargetReadRequest,
    )

    if spec["interface"] == "chdb":
        endpoint = EndpointDescriptor(
            name="bench_chdb",
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.CHDB,
            path=spec["path"],
        )
    else:
        endpoint = EndpointDescriptor(
            name="bench_http",
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.HTTP,
            host="127.0.0.1",
            port=spec["port"],
            user="default",
            database="default",
        )
    first = date.fromisoformat(spec["first_day"])
    days = [first + timedelta(days=d) for d in range(spec["days"])]
    request = TargetReadRequest(
        target_table=spec["table"],
        selector=GenerationSelector(
            partitions=tuple(
                PartitionBounds(
                    kind=BoundsKind.RANGE,
                    column="order_date",
                    lower=day.isoformat(),
                    upper=(day + timedelta(days=1)).isoformat(),
                    value_type="date",
                    label=f"order_date={day.isoformat()}",
                )
                for day in days
            )
        ),
        columns=("customer", "amount"),
        metrics=(ObservationMetric.ROW_COUNT, ObservationMetric.NULL_COUNT, ObservationMetric.DISTINCT_COUNT),
    )
    clock = Clock()
    outcome = SupervisedTargetReader().observe(endpoint, request, 60.0)
    seconds = clock.seconds()
    rows = 0
    if outcome.observation is not None and outcome.observation.metrics:
        rows = int(outcome.observation.value_of(ObservationMetric.ROW_COUNT) or 0)
    return {
        "rows": rows,
        "seconds": seconds,
        "cpu_seconds": clock.cpu_seconds(),
        "outcome": outcome.kind.value,
        "reason": outcome.reason.value,
        "termination_verified": outcome.termination_verified,
        "worker_elapsed_s": outcome.elapsed_seconds,
    }
