"""A schema's hash read another way: the same names, types and order whatever their nullability."""

from __future__ import annotations

from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema


def schema(*columns: tuple[str, str, bool]) -> TableSchema:
    return TableSchema(
        columns=tuple(ColumnSpec(name=n, clickhouse_type=t, nullable=z) for n, t, z in columns)
    )


def test_a_table_read_through_a_query_has_its_columns_up_to_nullability_and_nothing_else_does() -> None:
    table = schema(("id", "Int64", False), ("region", "String", False))
    through_a_query = schema(("id", "Int64", True), ("region", "String", True))

    assert table.schema_hash() in through_a_query.hashes_up_to_nullability()
    for other in (
        schema(("id", "Int64", False)),  # a column fewer
        schema(("region", "String", False), ("id", "Int64", False)),  # another order
        schema(("id", "Int64", False), ("region", "Float64", False)),  # another type
        schema(("id", "Int64", False), ("region", "String", False), ("amount", "Int64", False)),  # added
    ):
        assert other.schema_hash() not in through_a_query.hashes_up_to_nullability()
