"""``runtime.null_free.schema_for_target`` with port doubles: which columns it proves, when it reads nothing,
and that a source that cannot count NULLs is refused rather than trusted."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.runtime.null_free import schema_for_target

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int32", nullable=True),
        ColumnSpec(name="note", clickhouse_type="String", nullable=True),
        ColumnSpec(name="day", clickhouse_type="Date", nullable=False),
    )
)
BOUNDS = [
    PartitionBounds(
        kind=BoundsKind.RANGE, column="id", lower="1", upper="10", label="id=1..10", value_type="integer"
    )
]


class TargetWithout:
    """A sink double whose target declares ``columns`` without Nullable; records whether it was asked."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self.asked = 0

    def columns_refusing_null(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> list[str]:
        self.asked += 1
        return list(self.columns)


class Counting:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts
        self.asked: list[list[str]] = []

    def count_nulls(self, bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> dict[str, int]:
        self.asked.append(list(columns))
        return {c: self.counts[c] for c in columns}


def test_columns_proven_null_free_are_declared_non_nullable_and_nothing_else_changes() -> None:
    source = Counting({"id": 0, "note": 0})
    schema = schema_for_target(TargetWithout(["id"]), source, "t", SCHEMA, (), BOUNDS)  # type: ignore[arg-type]
    assert [(c.name, c.nullable) for c in schema.columns] == [("id", False), ("note", True), ("day", False)]
    assert source.asked == [["id"]]
    assert (
        SCHEMA.schema_hash() != schema.schema_hash()
    )  # the route keeps SCHEMA's: the engine planned with it


def test_a_null_in_the_rows_to_move_names_each_column_and_its_count() -> None:
    with pytest.raises(DponeError) as stopped:
        schema_for_target(
            TargetWithout(["id", "note"]),
            Counting({"id": 0, "note": 3}),
            "t",
            SCHEMA,
            (),
            BOUNDS,  # type: ignore[arg-type]
        )
    assert stopped.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert [(p["column"], p.get("rows")) for p in stopped.value.details["problems"]] == [("note", 3)]


def test_a_source_that_cannot_count_nulls_is_refused_not_trusted() -> None:
    with pytest.raises(DponeError) as stopped:
        schema_for_target(TargetWithout(["note"]), object(), "t", SCHEMA, (), BOUNDS)  # type: ignore[arg-type]
    assert stopped.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert "cannot count" in stopped.value.render()


def test_nothing_is_read_when_no_column_is_nullable_or_nothing_moves() -> None:
    target = TargetWithout(["id"])
    not_null = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="Int32", nullable=False),))
    assert schema_for_target(target, object(), "t", not_null, (), BOUNDS) is not_null  # type: ignore[arg-type]
    assert schema_for_target(target, object(), "t", SCHEMA, (), []) is SCHEMA  # type: ignore[arg-type]
    assert target.asked == 0
