"""A described column without a ClickHouse mapping stops a read only when the read needs it.

The SQL Server source describes ``xml``, ``geography`` or a ``decimal(50, 2)`` column through the same
``DescribedColumns`` as SQLite (``mssql_types.column_spec`` raising ``unsupported_column_type``); these
cases run that mapping itself, so what a SQL Server table with such a column does under each manifest is
pinned here without a server.
"""

from __future__ import annotations

import functools
import json

import pytest

from airflow_provider_dpone.adapters.sources import mssql_types
from airflow_provider_dpone.adapters.sources.read_shape import DescribedColumns, read_schema
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import SourceSpec

COLUMNS = [
    ("id", "int", None, None),
    ("doc", "xml", None, None),
    ("amount", "decimal", 50, 2),
    ("day", "date", None, None),
]


def described() -> DescribedColumns:
    columns = DescribedColumns()
    for name, type_name, precision, scale in COLUMNS:
        columns.add(
            name, functools.partial(mssql_types.column_spec, name, type_name, False, precision, scale)
        )
    return columns


def spec(**changes: object) -> SourceSpec:
    fields: dict[str, object] = {"type": "mssql", "connection": "c", "table": "dbo.t", **changes}
    return SourceSpec.model_validate_json(json.dumps(fields))


def test_columns_that_leave_the_unmapped_ones_out_read_the_rest() -> None:
    columns = described()
    schema = read_schema(columns.schema(), spec(columns=["day", "id"]), columns.unsupported)
    assert schema.names == ("day", "id")
    assert [c.clickhouse_type for c in schema.columns] == ["Date", "Int32"]


@pytest.mark.parametrize(
    ("changes", "column"),
    [
        ({}, "doc"),  # every column, in the table's order: the first unmapped one is named
        ({"columns": ["id", "amount"]}, "amount"),
        ({"columns": ["id"], "partitioning": {"kind": "list", "column": "doc", "values": ["a"]}}, "doc"),
        ({"columns": ["id"], "incremental": {"cursor": "amount"}}, "amount"),
    ],
)
def test_a_read_that_needs_an_unmapped_column_stops_naming_it(
    changes: dict[str, object], column: str
) -> None:
    columns = described()
    with pytest.raises(DponeError) as caught:
        read_schema(columns.schema(), spec(**changes), columns.unsupported)
    assert caught.value.code is ErrorCode.UNSUPPORTED_COLUMN_TYPE
    assert caught.value.details["column"] == column


def test_a_table_of_unmapped_columns_only_stops_with_the_first() -> None:
    columns = DescribedColumns()
    columns.add("doc", functools.partial(mssql_types.column_spec, "doc", "xml", True))
    with pytest.raises(DponeError) as caught:
        columns.schema()
    assert caught.value.details["column"] == "doc"
