"""``replay.scan.referenced_operations`` over a long route: only checkpoints that carry the capsule key are
looked at, and every one of those is, so an empty or null reference still counts as malformed (it blocks
the route) rather than as no reference."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import JsonValue

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.replay.ref import CAPSULE_REF_KEY
from airflow_provider_dpone.runtime.replay.scan import referenced_operations

ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.REPLACE_PARTITION
)


def committed(day: int, diagnostics: dict[str, JsonValue]) -> PartitionCheckpoint:
    return PartitionCheckpoint(
        partition_id=f"p{day:03d}",
        route=ROUTE,
        run_id="r",
        status=CheckpointStatus.COMMITTED,
        started_at=datetime(2026, 12, 1, tzinfo=timezone.utc),
        rows=1,
        query_hash="q",
        schema_hash="s",
        bounds=PartitionBounds(
            kind=BoundsKind.RANGE, column="day", lower=f"{day}", upper=f"{day + 1}", label=f"day={day:03d}"
        ),
        diagnostics=diagnostics,
    )


@pytest.mark.parametrize("reference", [None, {}, [], ""])
def test_an_empty_or_null_reference_among_many_without_one_is_malformed_not_absent(
    reference: JsonValue,
) -> None:
    latest = [committed(day, {}) for day in range(300)]
    latest.insert(150, committed(999, {CAPSULE_REF_KEY: reference}))
    groups, _, invalid = referenced_operations(latest)
    assert groups == {}
    assert [c.partition_id for c in invalid] == ["p999"]


def test_checkpoints_without_the_key_are_no_reference_at_all() -> None:
    groups, resolutions, invalid = referenced_operations([committed(day, {"other": 1}) for day in range(50)])
    assert (groups, resolutions, invalid) == ({}, {}, [])
