"""Manifest fields naming source columns are checked against the described columns (issue 11, point 4)."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.adapters.sources.read_shape import (
    checked_schema,
    read_schema,
    refuse_sqlite_renamed_duplicates,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import SourceSpec
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

FULL = TableSchema(
    columns=tuple(
        ColumnSpec(name=n, clickhouse_type=t)
        for n, t in (
            ("id", "Int64"),
            ("order_date", "Date"),
            ("amount", "Decimal(12, 2)"),
            ("UpdatedAt", "DateTime"),
        )
    )
)


def spec(**fields: object) -> SourceSpec:
    return SourceSpec.model_validate(
        {"type": "mssql", "connection": "src", "table": "dbo.orders", **fields}, strict=False
    )


def test_case_variants_of_one_name_are_refused_as_a_repeated_column() -> None:
    """ClickHouse keeps ``id`` and ``ID`` apart, but SQL Server cannot select both from a derived table."""
    with pytest.raises(DponeError) as refused:
        checked_schema(
            [ColumnSpec(name="id", clickhouse_type="Int64"), ColumnSpec(name="ID", clickhouse_type="Int64")]
        )
    assert refused.value.code is ErrorCode.MANIFEST_INVALID
    assert "'id' and 'ID'" in refused.value.safe_message
    assert refused.value.details == {"field": "source.query", "column": "ID", "position": 2}


@pytest.mark.parametrize(
    "names",
    [["id", "id:1"], ["id", "ID:1"], ["a", "b", "A:2"], ["x:1", "x:2"]],
)
def test_names_sqlite_made_unique_by_a_counter_are_refused(names: list[str]) -> None:
    with pytest.raises(DponeError) as refused:
        refuse_sqlite_renamed_duplicates(names)
    assert refused.value.code is ErrorCode.MANIFEST_INVALID
    assert "twice" in refused.value.safe_message


@pytest.mark.parametrize("names", [["id", "ratio:1"], ["id:1"], ["time:12", "date"], ["a:b", "a"]])
def test_a_colon_and_digits_alone_are_no_duplicate(names: list[str]) -> None:
    refuse_sqlite_renamed_duplicates(names)


@pytest.mark.parametrize(
    ("fields", "field", "column", "suggestion"),
    [
        ({"incremental": {"cursor": "updatedat"}}, "source.incremental.cursor", "updatedat", "UpdatedAt"),
        ({"columns": ["id", "amout"]}, "source.columns", "amout", "amount"),
        (
            {"partitioning": {"kind": "day", "column": "order_day"}},
            "source.partitioning.column",
            "order_day",
            "order_date",
        ),
        ({"incremental": {"cursor": "zzz"}}, "source.incremental.cursor", "zzz", None),
    ],
)
def test_an_unknown_column_names_its_field_the_column_and_the_closest_name(
    fields: dict[str, object], field: str, column: str, suggestion: str | None
) -> None:
    with pytest.raises(DponeError) as refused:
        read_schema(FULL, spec(**fields))
    error = refused.value
    assert error.code is ErrorCode.MANIFEST_INVALID
    assert error.safe_message.startswith(f"{field} names column {column!r}, which the source does not have")
    assert error.details.get("field") == field and error.details.get("column") == column
    assert error.details.get("suggestion") == suggestion


def test_a_cursor_left_out_of_source_columns_is_refused() -> None:
    with pytest.raises(DponeError) as refused:
        read_schema(FULL, spec(columns=["id", "amount"], incremental={"cursor": "UpdatedAt"}))
    assert "source.columns leaves out" in refused.value.safe_message


def test_the_partition_column_may_be_left_out_of_source_columns() -> None:
    schema = read_schema(
        FULL,
        spec(
            columns=["id", "UpdatedAt"],
            partitioning={"kind": "day", "column": "order_date"},
            incremental={"cursor": "UpdatedAt"},
        ),
    )
    assert schema.names == ("id", "UpdatedAt")


@pytest.mark.parametrize("query", ["", "   ", " ;\n", ";;"])
def test_an_empty_query_is_a_manifest_error(query: str) -> None:
    with pytest.raises(ValueError, match="the query is empty"):
        spec(query=query)


def test_a_column_listed_twice_in_source_columns_ignoring_case_is_a_manifest_error() -> None:
    with pytest.raises(ValueError, match="entry 2 repeats an earlier column"):
        spec(columns=["id", "amount", "ID"])
