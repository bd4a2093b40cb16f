"""SQLite source against real SQLite files: types, planning, bounded chunks, order, counts, errors."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources import open_source
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import (
    Incremental,
    Partitioning,
    PartitionKind,
    SourceSpec,
    SourceType,
)
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec

ROWS = 3000
DAYS = 60  # 50 rows a day, 2026-10-02 .. 2026-11-30
ALL = PartitionBounds(kind=BoundsKind.ALL, label="all")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-source") / "source.sqlite"
    create_demo_source(path, ROWS, days=DAYS)
    return path


def _spec(table: str = "orders", **changes: object) -> SourceSpec:
    fields: dict[str, object] = {"type": SourceType.SQLITE, "connection": "demo_source", "table": table}
    fields.update(changes)
    return SourceSpec(**fields)  # type: ignore[arg-type]


def _source(path: Path, table: str = "orders", **changes: object) -> SqliteSource:
    return SqliteSource(path, _spec(table, **changes))


def _rows(chunks: list[ColumnChunk]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for chunk in chunks:
        rows.extend(zip(*chunk.columns, strict=True))
    return rows


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- describe --------------------------------------------------------------------------------------------


def test_demo_table_maps_declared_types_and_not_null(demo: Path) -> None:
    source = _source(demo)
    try:
        assert source.describe().columns == (
            ColumnSpec(name="id", clickhouse_type="Int64", nullable=False, source_type="INTEGER"),
            ColumnSpec(name="order_date", clickhouse_type="Date", nullable=False, source_type="DATE"),
            ColumnSpec(name="customer", clickhouse_type="String", nullable=False, source_type="TEXT"),
            ColumnSpec(
                name="amount", clickhouse_type="Decimal(12, 2)", nullable=False, source_type="NUMERIC(12,2)"
            ),
            ColumnSpec(name="updated_at", clickhouse_type="DateTime", nullable=False, source_type="DATETIME"),
        )
    finally:
        source.close()


def test_declared_types_follow_sqlite_affinity_rules(tmp_path: Path) -> None:
    path = tmp_path / "types.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE t (i INTEGER PRIMARY KEY, big BIGINT, r REAL, dbl DOUBLE PRECISION, v VARCHAR(20) NOT NULL,"
            " c CLOB, b BLOB, u, d DATE, ts TIMESTAMP, dt DATETIME, n NUMERIC, dec DECIMAL(10, 3), flag BOOLEAN,"
            " tm TIME, g GUID)"
        )
        db.execute(
            "INSERT INTO t VALUES (1, 2, 1.5, 2.5, 'x', 'y', x'00ff', 42, '2026-11-30', '2026-11-30T10:00:00.000',"
            " '2026-11-30 10:00:00+02:00', 7, 1.235, 1, '08:30:00', 'abc')"
        )
    source = _source(path, table="t")
    try:
        types = {c.name: (c.clickhouse_type, c.nullable) for c in source.describe().columns}
        assert types == {
            "i": ("Int64", False),
            "big": ("Int64", True),
            "r": ("Float64", True),
            "dbl": ("Float64", True),
            "v": ("String", False),
            "c": ("String", True),
            "b": ("String", True),
            "u": ("String", True),
            "d": ("Date", True),
            "ts": ("DateTime", True),
            "dt": ("DateTime", True),
            "n": ("Float64", True),
            "dec": ("Decimal(10, 3)", True),
            "flag": ("UInt8", True),
            "tm": ("String", True),
            "g": ("String", True),
        }
        (row,) = _rows(list(source.read("p", ALL, 10)))
        assert row == (
            1,
            2,
            1.5,
            2.5,
            "x",
            "y",
            b"\x00\xff",
            "42",  # untyped column: its integer becomes text, the declared String
            date(2026, 11, 30),
            datetime(2026, 11, 30, 10, 0, 0),  # zero sub-second digits change nothing (others are refused)
            datetime(2026, 11, 30, 8, 0, 0),  # an explicit offset is converted to UTC
            7,
            Decimal("1.235"),  # REAL 1.235: its shortest form, exactly the declared scale
            1,
            "08:30:00",
            "abc",
        )
    finally:
        source.close()


def test_primary_keys_are_not_null_only_where_sqlite_guarantees_it(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE rowid_text (k TEXT PRIMARY KEY, v INTEGER)")
        db.execute("CREATE TABLE no_rowid (k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID")
    for table, nullable in (("rowid_text", True), ("no_rowid", False)):
        source = _source(path, table=table)
        try:
            assert source.describe().column("k").nullable is nullable, table
        finally:
            source.close()


def test_decimal_wider_than_clickhouse_allows_is_unsupported_naming_the_column(tmp_path: Path) -> None:
    path = tmp_path / "wide.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, huge DECIMAL(50, 2))")
    source = _source(path, table="t")
    try:
        with pytest.raises(DponeError) as caught:
            source.describe()
        assert caught.value.code is ErrorCode.UNSUPPORTED_COLUMN_TYPE
        assert caught.value.details["column"] == "huge"
    finally:
        source.close()


@pytest.mark.parametrize(
    ("changes", "stops"),
    [
        ({"columns": ("id", "note")}, False),  # the unmapped column left out, as the error advises
        ({}, True),  # every column: the unmapped one too
        ({"columns": ("id", "huge")}, True),
        (
            {
                "columns": ("id", "note"),
                "partitioning": Partitioning.model_validate_json(
                    '{"kind": "integer_range", "column": "huge", "size": 10}'
                ),
            },
            True,
        ),
        ({"columns": ("id", "note"), "incremental": Incremental(cursor="huge")}, True),
    ],
    ids=["left-out", "all-columns", "pinned", "partition-column", "cursor"],
)
def test_a_column_without_a_mapping_stops_a_read_only_when_the_read_needs_it(
    tmp_path: Path, changes: dict[str, object], stops: bool
) -> None:
    """Found by hand: ``unsupported_column_type`` says "leave it out with 'columns'", and a table with one
    ``NUMERIC(40,2)`` column (an ``xml`` one on SQL Server) still stopped when ``source.columns`` left it
    out. It stops a read only when the read returns it or the manifest names it."""
    path = tmp_path / "wide.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, huge DECIMAL(50, 2), note TEXT)")
        db.execute("INSERT INTO t VALUES (1, 2.5, 'a')")
    source = _source(path, table="t", **changes)
    try:
        if stops:
            with pytest.raises(DponeError) as caught:
                source.describe()
            assert caught.value.code is ErrorCode.UNSUPPORTED_COLUMN_TYPE
            assert caught.value.details["column"] == "huge"
        else:
            assert source.describe().names == ("id", "note")
            (bounds,) = source.plan_partitions()
            assert _rows(list(source.read("p", bounds, 10))) == [(1, "a")]
    finally:
        source.close()


def test_columns_select_and_order_a_subset(demo: Path) -> None:
    source = _source(demo, columns=("amount", "id"))
    try:
        assert source.describe().names == ("amount", "id")
        chunk = next(iter(source.read("p", ALL, 5)))
        assert chunk.names == ("amount", "id")
        assert list(chunk.columns[1]) == [1, 2, 3, 4, 5]
    finally:
        source.close()


def test_an_unknown_listed_column_is_a_manifest_error(demo: Path) -> None:
    source = _source(demo, columns=("id", "nope"))
    try:
        with pytest.raises(DponeError) as caught:
            source.describe()
        assert caught.value.code is ErrorCode.MANIFEST_INVALID
    finally:
        source.close()


@pytest.mark.parametrize("ending", [";", "; -- the first ten;", "\n-- the first ten", ";/* ten */ ;"])
def test_a_query_is_described_through_a_temporary_view(demo: Path, ending: str) -> None:
    """Red before for ``; -- ...``: the ``;`` stayed inside the read's parentheses (``source_read_failed``)."""
    query = (
        "SELECT id, amount, customer || '!' AS shout, amount * 2 AS doubled FROM orders WHERE id <= 10"
        + ending
    )
    before = _file_digest(demo)
    source = _source(demo, query=query)
    try:
        columns = {c.name: (c.clickhouse_type, c.nullable) for c in source.describe().columns}
        assert columns == {
            "id": ("Int64", True),
            "amount": ("Decimal(12, 2)", True),
            "shout": ("String", True),
            "doubled": ("String", True),  # an expression has no declared type: String, values as text
        }
        (bounds,) = source.plan_partitions()
        assert source.count(bounds) == 10
        rows = _rows(list(source.read("p", bounds, 4)))
        assert [r[0] for r in rows] == list(range(1, 11))
        assert all(isinstance(r[1], Decimal) and isinstance(r[3], str) for r in rows)
    finally:
        source.close()
    assert _file_digest(demo) == before  # the temp view never touched the file


# -- planning and reads ----------------------------------------------------------------------------------


def test_day_partitions_are_the_days_holding_rows_and_counts_match_reads(demo: Path) -> None:
    source = _source(demo, partitioning=Partitioning(kind=PartitionKind.DAY, column="order_date"))
    try:
        bounds = source.plan_partitions()
        assert len(bounds) == DAYS
        assert bounds[0].label == "order_date=2026-10-02"
        assert bounds[-1].label == "order_date=2026-11-30"
        assert (bounds[-1].lower, bounds[-1].upper, bounds[-1].value_type) == (
            "2026-11-30",
            "2026-12-01",
            "date",
        )
        total = 0
        for b in bounds:
            rows = _rows(list(source.read("p", b, 16)))
            assert len(rows) == source.count(b) == ROWS // DAYS
            assert {r[1] for r in rows} == {date.fromisoformat(b.lower or "")}
            total += len(rows)
        assert total == ROWS
    finally:
        source.close()


def test_month_partitions_split_at_calendar_months(demo: Path) -> None:
    source = _source(demo, partitioning=Partitioning(kind=PartitionKind.MONTH, column="updated_at"))
    try:
        bounds = source.plan_partitions()
        assert [b.label for b in bounds] == ["updated_at=2026-10", "updated_at=2026-11"]
        counts = [source.count(b) for b in bounds]
        assert counts == [30 * 50, 30 * 50]
        assert sum(c.row_count for c in source.read("p", bounds[1], 1000)) == counts[1]
    finally:
        source.close()


def test_integer_ranges_are_aligned_multiples_holding_rows(demo: Path) -> None:
    source = _source(
        demo, partitioning=Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=1000)
    )
    try:
        bounds = source.plan_partitions()
        assert [b.label for b in bounds] == [
            "id=[0,1000)",
            "id=[1000,2000)",
            "id=[2000,3000)",
            "id=[3000,4000)",
        ]
        assert [source.count(b) for b in bounds] == [999, 1000, 1000, 1]
    finally:
        source.close()


def test_list_partitions_select_exact_values(demo: Path) -> None:
    values = ("Acme GmbH", "O'Brien & Sons", "Zoë Ångström", "Nobody Ltd")
    source = _source(
        demo, partitioning=Partitioning(kind=PartitionKind.LIST, column="customer", values=values)
    )
    try:
        bounds = source.plan_partitions()
        assert [b.values for b in bounds] == [(v,) for v in values]
        counts = [source.count(b) for b in bounds]
        assert counts[-1] == 0 and all(c > 0 for c in counts[:-1])
        rows = _rows(list(source.read("p", bounds[1], 100)))
        assert len(rows) == counts[1] and {r[2] for r in rows} == {"O'Brien & Sons"}
    finally:
        source.close()


def test_chunks_never_exceed_chunk_rows(demo: Path) -> None:
    source = _source(demo)
    try:
        sizes = [chunk.row_count for chunk in source.read("pid-1", ALL, 7)]
        assert sum(sizes) == ROWS
        assert max(sizes) == 7 and sizes[:-1] == [7] * (len(sizes) - 1)
        chunk = next(iter(source.read("pid-1", ALL, 7)))
        assert chunk.partition_id == "pid-1"
        assert all(len(column) == chunk.row_count for column in chunk.columns)
    finally:
        source.close()


def test_reads_are_deterministic_and_ordered_by_partition_column_then_key(demo: Path) -> None:
    source = _source(demo, partitioning=Partitioning(kind=PartitionKind.MONTH, column="updated_at"))
    try:
        bounds = source.plan_partitions()[0]
        first = _rows(list(source.read("p", bounds, 333)))
        second = _rows(list(source.read("p", bounds, 1000)))
        assert first == second
        keys = [(r[4], r[0]) for r in first]
        assert keys == sorted(keys)
    finally:
        source.close()


def test_values_are_the_python_types_of_their_clickhouse_types(demo: Path) -> None:
    source = _source(demo)
    try:
        row = _rows([next(iter(source.read("p", ALL, 3)))])[0]
        assert [type(v) for v in row] == [int, date, str, Decimal, datetime]
        amount = row[3]
        assert isinstance(amount, Decimal) and amount == amount.quantize(Decimal("0.01"))
    finally:
        source.close()


def test_partitions_on_a_column_with_nulls_are_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "nulls.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE)")
        db.executemany("INSERT INTO t VALUES (?, ?)", [(1, "2026-11-30"), (2, None), (3, "30/11/2026")])
    source = _source(path, table="t", partitioning=Partitioning(kind=PartitionKind.DAY, column="d"))
    try:
        with pytest.raises(DponeError) as caught:
            source.plan_partitions()
        assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
        assert caught.value.details["unplaceable_rows"] == 2
        assert "30/11" not in caught.value.render()
    finally:
        source.close()


def test_an_empty_table_plans_no_day_partitions(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    create_demo_source(path, 0)
    source = _source(path, partitioning=Partitioning(kind=PartitionKind.DAY, column="order_date"))
    try:
        assert source.plan_partitions() == []
        assert list(source.read("p", ALL, 10)) == []
    finally:
        source.close()


def test_a_date_clickhouse_cannot_hold_fails_the_read_naming_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, born DATE)")
        db.execute("INSERT INTO t VALUES (1, '1900-01-01')")
    source = _source(path, table="t")
    try:
        with pytest.raises(DponeError) as caught:
            list(source.read("p", ALL, 10))
        assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
        assert caught.value.details["column"] == "born"
    finally:
        source.close()


# -- errors ----------------------------------------------------------------------------------------------


def test_a_missing_table_is_reported_before_extraction(demo: Path) -> None:
    source = _source(demo, table="main.nope")
    try:
        with pytest.raises(DponeError) as caught:
            source.read("p", ALL, 10)
        assert caught.value.code is ErrorCode.SOURCE_TABLE_MISSING
    finally:
        source.close()


def test_a_query_over_a_missing_table_is_a_missing_table(demo: Path) -> None:
    source = _source(demo, query="SELECT * FROM nope")
    try:
        with pytest.raises(DponeError) as caught:
            source.describe()
        assert caught.value.code is ErrorCode.SOURCE_TABLE_MISSING
    finally:
        source.close()


@pytest.mark.parametrize("query", [None, 'SELECT id, customer AS "" FROM named'])
def test_a_column_without_a_name_is_refused_as_input_naming_its_position(
    tmp_path: Path, query: str | None
) -> None:
    """Red before: SQLite admits a column named ``""``; describing it failed the column model's own rule
    (``unexpected_error: ValidationError``)."""
    path = tmp_path / "unnamed.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute('CREATE TABLE named (id INTEGER PRIMARY KEY, "" TEXT, customer TEXT)')
    source = _source(path, table="named", query=query)
    try:
        with pytest.raises(DponeError) as caught:
            source.describe()
        assert caught.value.code is ErrorCode.MANIFEST_INVALID
        assert caught.value.details["position"] == 2
    finally:
        source.close()


def test_a_missing_file_is_unreachable_and_never_created(tmp_path: Path) -> None:
    path = tmp_path / "secret-dir" / "absent.sqlite"
    source = _source(path)
    with pytest.raises(DponeError) as caught:
        source.describe()
    assert caught.value.code is ErrorCode.SOURCE_UNREACHABLE
    assert str(tmp_path) not in caught.value.render()
    assert isinstance(caught.value.__cause__, sqlite3.Error)
    assert not path.exists()


def test_reads_never_modify_the_source_file(demo: Path) -> None:
    before = _file_digest(demo)
    source = _source(demo, partitioning=Partitioning(kind=PartitionKind.DAY, column="order_date"))
    try:
        for b in source.plan_partitions()[:3]:
            list(source.read("p", b, 100))
    finally:
        source.close()
    assert _file_digest(demo) == before


def test_factory_opens_sqlite_sources_and_refuses_mismatched_connections(demo: Path) -> None:
    endpoint = EndpointDescriptor(name="demo_source", kind=EndpointKind.SQLITE, path=str(demo))
    source = open_source(_spec(), endpoint)
    try:
        assert source.count(ALL) == ROWS
    finally:
        source.close()
    clickhouse = EndpointDescriptor(name="ch", kind=EndpointKind.CLICKHOUSE, path=str(demo))
    with pytest.raises(DponeError) as caught:
        open_source(_spec(), clickhouse)
    assert caught.value.code is ErrorCode.CONNECTION_INVALID


# -- demo data -------------------------------------------------------------------------------------------


def _all_rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT * FROM orders ORDER BY id").fetchall()


def test_demo_data_is_deterministic_for_its_arguments(tmp_path: Path) -> None:
    create_demo_source(tmp_path / "a.sqlite", 500, days=10, seed=3)
    create_demo_source(tmp_path / "b.sqlite", 500, days=10, seed=3)
    create_demo_source(tmp_path / "c.sqlite", 500, days=10, seed=4)
    a, b, c = (_all_rows(tmp_path / f"{n}.sqlite") for n in "abc")
    assert a == b
    assert a != c
    assert len({r[1] for r in a}) == 10


def test_demo_data_keeps_a_table_of_the_right_size_and_recreates_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    assert create_demo_source(path, 200, days=5) == 200
    with sqlite3.connect(path) as db:
        db.execute("UPDATE orders SET customer = 'kept' WHERE id = 1")
    create_demo_source(path, 200, days=5)
    assert _all_rows(path)[0][2] == "kept"
    create_demo_source(path, 300, days=5)
    rows = _all_rows(path)
    assert len(rows) == 300 and rows[0][2] != "kept"
