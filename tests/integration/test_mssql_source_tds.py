"""MssqlSource over the real pymssql/FreeTDS wire path, against the pysqlbridge TDS emulator.

What this proves: login, T-SQL generation as the emulator parses it (bracket quoting, ``CAST(... AS DATE)``
bounds, ``IN`` lists with Unicode and quotes, ``COUNT_BIG``, ``SELECT DISTINCT`` probes, derived-table
queries), ``INFORMATION_SCHEMA.COLUMNS`` description, streaming with ``fetchmany`` and the error codes.
What it cannot prove: the emulator serves only int/bigint, float, nvarchar, bit and datetime columns and
reports every column as nullable, its DECIMAL comes back as float and its DATE as datetime, it has no primary
keys and no ``sys.dm_exec_describe_first_result_set``. Every other SQL Server type, NOT NULL columns and the
normalization of those emulator values are covered by ``tests/unit/test_mssql_types.py``; the T-SQL text by
``tests/unit/test_mssql_sql.py``. None of this is a SQL Server certification.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from airflow_provider_dpone.adapters.sources import open_source
from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

pytestmark = pytest.mark.service

ALL = PartitionBounds(kind=BoundsKind.ALL, label="all")


def _spec(**changes: object) -> SourceSpec:
    fields: dict[str, object] = {"type": SourceType.MSSQL, "connection": "mssql_test", "table": "dbo.orders"}
    fields.update(changes)
    return SourceSpec(**fields)  # type: ignore[arg-type]


@pytest.fixture
def make_source(tds_emulator: EndpointDescriptor) -> Iterator[Any]:
    opened: list[MssqlSource] = []

    def make(**changes: object) -> MssqlSource:
        source = MssqlSource(tds_emulator, _spec(**changes))
        opened.append(source)
        return source

    yield make
    for source in opened:
        source.close()


def _rows(chunks: list[ColumnChunk]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for chunk in chunks:
        rows.extend(zip(*chunk.columns, strict=True))
    return rows


def _as_served(row: dict[str, Any]) -> tuple[object, ...]:
    """A ``tds_orders`` row as the emulator's column types carry it (datetime date, float amount)."""
    return (
        row["id"],
        datetime.combine(row["order_date"], datetime.min.time()),
        row["customer"],
        float(row["amount"]),
        row["updated_at"],
    )


def test_describe_maps_the_emulator_columns_from_information_schema(make_source: Any) -> None:
    schema = make_source().describe()
    assert [(c.name, c.clickhouse_type, c.nullable, c.source_type) for c in schema.columns] == [
        ("id", "Int32", True, "int"),
        ("order_date", "DateTime", True, "datetime"),
        ("customer", "String", True, "nvarchar"),
        ("amount", "Float64", True, "float"),
        ("updated_at", "DateTime", True, "datetime"),
    ]


def test_whole_table_read_returns_every_served_row_in_key_order(
    make_source: Any, tds_orders: list[dict[str, Any]]
) -> None:
    source = make_source()
    (bounds,) = source.plan_partitions()
    assert bounds == ALL
    rows = _rows(list(source.read("pid", bounds, 8)))
    assert rows == [_as_served(r) for r in tds_orders]
    assert source.count(ALL) == len(tds_orders)


def test_chunks_are_bounded_by_chunk_rows(make_source: Any, tds_orders: list[dict[str, Any]]) -> None:
    sizes = [chunk.row_count for chunk in make_source().read("pid", ALL, 7)]
    assert sum(sizes) == len(tds_orders)
    assert sizes[:-1] == [7] * (len(sizes) - 1) and 0 < sizes[-1] <= 7


def test_day_partitions_on_a_datetime_column(make_source: Any, tds_orders: list[dict[str, Any]]) -> None:
    source = make_source(partitioning=Partitioning(kind=PartitionKind.DAY, column="order_date"))
    bounds = source.plan_partitions()
    days = sorted({r["order_date"] for r in tds_orders})
    assert [b.label for b in bounds] == [f"order_date={d.isoformat()}" for d in days]
    for b, day in zip(bounds, days, strict=True):
        expected = [
            _as_served(r) for r in sorted(tds_orders, key=lambda r: r["id"]) if r["order_date"] == day
        ]
        rows = _rows(list(source.read("pid", b, 4)))
        assert rows == expected
        assert source.count(b) == len(expected)


def test_month_partitions_on_the_update_time(make_source: Any, tds_orders: list[dict[str, Any]]) -> None:
    source = make_source(partitioning=Partitioning(kind=PartitionKind.MONTH, column="updated_at"))
    months = sorted({(r["updated_at"].year, r["updated_at"].month) for r in tds_orders})
    bounds = source.plan_partitions()
    assert [b.label for b in bounds] == [f"updated_at={y:04d}-{m:02d}" for y, m in months]
    assert sum(source.count(b) for b in bounds) == len(tds_orders)


def test_integer_range_partitions_hold_every_row_once(
    make_source: Any, tds_orders: list[dict[str, Any]]
) -> None:
    source = make_source(partitioning=Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=20))
    bounds = source.plan_partitions()
    assert [b.label for b in bounds] == ["id=[0,20)", "id=[20,40)", "id=[40,60)"]
    ids = [row[0] for b in bounds for row in _rows(list(source.read("pid", b, 100)))]
    assert ids == sorted(r["id"] for r in tds_orders)


def test_list_partitions_match_unicode_and_quoted_values(
    make_source: Any, tds_orders: list[dict[str, Any]]
) -> None:
    values = ("Zoë Ångström", "O'Brien & Sons", "東京商事")
    source = make_source(partitioning=Partitioning(kind=PartitionKind.LIST, column="customer", values=values))
    bounds = source.plan_partitions()
    for b, value in zip(bounds, values, strict=True):
        expected = [r["id"] for r in tds_orders if r["customer"] == value]
        assert expected, value
        assert [row[0] for row in _rows(list(source.read("pid", b, 100)))] == expected
        assert source.count(b) == len(expected)


def test_reads_are_deterministic(make_source: Any) -> None:
    source = make_source(partitioning=Partitioning(kind=PartitionKind.DAY, column="order_date"))
    bounds = source.plan_partitions()[2]
    assert _rows(list(source.read("pid", bounds, 3))) == _rows(list(source.read("pid", bounds, 50)))


def test_interleaved_reads_and_counts_do_not_truncate_each_other(
    make_source: Any, tds_orders: list[dict[str, Any]]
) -> None:
    """Each read has its own connection: one pymssql connection would drop a pending result silently."""
    source = make_source(partitioning=Partitioning(kind=PartitionKind.DAY, column="order_date"))
    first, second = source.plan_partitions()[:2]
    a, b = source.read("a", first, 2), source.read("b", second, 2)
    rows_a, rows_b = [next(a)], [next(b)]
    assert source.count(ALL) == len(tds_orders)
    rows_a.extend(a)
    rows_b.extend(b)
    assert sum(c.row_count for c in rows_a) == source.count(first)
    assert sum(c.row_count for c in rows_b) == source.count(second)


@pytest.mark.parametrize("ending", ["", "; -- those with an s;"])
def test_a_query_is_read_as_a_derived_table_with_percent_signs_intact(
    make_source: Any, tds_orders: list[dict[str, Any]], ending: str
) -> None:
    query = (
        "SELECT id, customer, CAST(order_date AS DATE) AS day FROM dbo.orders WHERE customer LIKE '%s%'"
        + ending
    )
    source = make_source(query=query, partitioning=Partitioning(kind=PartitionKind.DAY, column="day"))
    schema = source.describe()  # the emulator has no describe DMV: coarse wire types
    assert [(c.name, c.clickhouse_type) for c in schema.columns] == [
        ("id", "Float64"),
        ("customer", "String"),
        ("day", "DateTime"),
    ]
    expected = sorted(r["id"] for r in tds_orders if r["customer"] and "s" in r["customer"].lower())
    got = [row[0] for b in source.plan_partitions() for row in _rows(list(source.read("pid", b, 100)))]
    assert sorted(float(str(i)) for i in got) == [float(i) for i in expected]
    assert source.query_hash() != make_source().query_hash()


def test_selected_columns_only(make_source: Any) -> None:
    source = make_source(columns=("customer", "id"))
    chunk = next(iter(source.read("pid", ALL, 3)))
    assert chunk.names == ("customer", "id")
    assert list(chunk.columns[1]) == [1, 2, 3]


def test_a_missing_table_is_reported_before_extraction(make_source: Any) -> None:
    source = make_source(table="dbo.no_such_table")
    with pytest.raises(DponeError) as caught:
        source.read("pid", ALL, 10)
    assert caught.value.code is ErrorCode.SOURCE_TABLE_MISSING


def test_a_query_the_server_cannot_run_is_a_read_failure_without_its_text(make_source: Any) -> None:
    source = make_source(query="SELECT NEWID() AS secret_marker FROM dbo.orders")
    with pytest.raises(DponeError) as caught:
        source.describe()
    assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
    assert "secret_marker" not in caught.value.render()
    assert "NEWID" not in caught.value.render()
    assert caught.value.__cause__ is not None


def test_a_wrong_password_is_unreachable_and_never_echoed(tds_emulator: EndpointDescriptor) -> None:
    endpoint = tds_emulator.model_copy(update={"password": SecretStr("not-the-pw-4711")})
    source = MssqlSource(endpoint, _spec())
    try:
        with pytest.raises(DponeError) as caught:
            source.describe()
    finally:
        source.close()
    assert caught.value.code is ErrorCode.SOURCE_UNREACHABLE
    assert "not-the-pw-4711" not in caught.value.render()
    assert "not-the-pw-4711" not in str(caught.value.to_json())


def test_a_closed_port_is_unreachable(tds_emulator: EndpointDescriptor) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    endpoint = tds_emulator.model_copy(update={"port": free_port})
    source = MssqlSource(endpoint, _spec(), login_timeout=5)
    try:
        with pytest.raises(DponeError) as caught:
            source.describe()
    finally:
        source.close()
    assert caught.value.code is ErrorCode.SOURCE_UNREACHABLE


def test_factory_opens_a_mssql_source(
    tds_emulator: EndpointDescriptor, tds_orders: list[dict[str, Any]]
) -> None:
    source = open_source(_spec(), tds_emulator)
    try:
        assert source.count(ALL) == len(tds_orders)
    finally:
        source.close()


def test_emulator_rows_match_the_fixture_as_sql_server_would_hold_them(
    make_source: Any, tds_orders: list[dict[str, Any]]
) -> None:
    """The served dates are midnight datetimes: their date part is the fixture's ``date`` exactly."""
    rows = _rows(list(make_source().read("pid", ALL, 100)))
    assert [r[1].date() for r in rows] == [r["order_date"] for r in tds_orders]  # type: ignore[attr-defined]
    assert all(isinstance(r["order_date"], date) for r in tds_orders)


def test_a_query_over_a_missing_table_is_a_missing_table(make_source: Any) -> None:
    source = make_source(query="SELECT id FROM dbo.no_such_table")
    with pytest.raises(DponeError) as caught:
        source.describe()
    assert caught.value.code is ErrorCode.SOURCE_TABLE_MISSING
