"""Which ``LowCardinality`` target columns take a source column's values exactly (``table_schema``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_provider_dpone.adapters.clickhouse.arrow_insert import arrow_type
from airflow_provider_dpone.adapters.clickhouse.table_schema import (
    TargetColumn,
    compatibility_problems,
    types_compatible,
)
from airflow_provider_dpone.adapters.clickhouse.type_names import stored_type
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema


@pytest.mark.parametrize(
    ("source", "target", "compatible"),
    [
        ("String", "LowCardinality(String)", True),
        ("String", "LowCardinality( String )", True),  # spelled with blanks
        ("String", "LowCardinality(Nullable(String))", True),  # every value fits, no NULL comes
        ("Nullable(String)", "LowCardinality(Nullable(String))", True),
        ("Nullable(String)", "LowCardinality(String)", False),  # a NULL would read ''
        ("Int64", "LowCardinality(Int64)", False),  # only String was proven
        ("Date", "LowCardinality(String)", False),
        ("String", "LowCardinality(FixedString(3))", False),
        ("String", "Nullable(LowCardinality(String))", False),  # not a type ClickHouse makes
    ],
)
def test_a_low_cardinality_column_takes_exactly_the_values_of_its_inner_string_type(
    source: str, target: str, compatible: bool
) -> None:
    assert types_compatible(source, target) is compatible


def test_an_unwritten_nullable_low_cardinality_column_is_accepted_and_a_non_nullable_one_is_not() -> None:
    schema = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),))
    target = {
        "id": TargetColumn("id", "Int64", ""),
        "note": TargetColumn("note", "LowCardinality(Nullable(String))", ""),  # new rows read NULL
        "tag": TargetColumn("tag", "LowCardinality(String)", ""),  # new rows would read ''
    }
    assert [p.column for p in compatibility_problems(schema, target)] == ["tag"]


def test_the_stored_type_of_an_encoded_string_column_and_its_arrow_form() -> None:
    assert stored_type("LowCardinality(Nullable(String))") == "Nullable(String)"
    assert stored_type("LowCardinality(Int64)") == "LowCardinality(Int64)"
    assert arrow_type("LowCardinality(String)") == pa.binary()
    assert arrow_type("LowCardinality(Nullable(String))") == pa.binary()
