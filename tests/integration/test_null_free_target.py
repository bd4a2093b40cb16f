"""A target column declared without ``Nullable`` takes a nullable source column whose moved rows hold no NULL.

ClickHouse tables avoid ``Nullable``; SQL Server declares most columns nullable. Before arming, the run
counts the NULLs of such columns in the partitions it moves: none, and every path loads the rows value for
value into the owner's table; any, and the run stops naming the column and the count, nothing written, no
checkpoint (a NULL outside the partitions moved does not matter). A NULL that arrives after the count is
refused by the load, never written as the column's default (``''``, ``0``). On chDB and the 18.16 server,
from SQLite and from SQL Server over the TDS emulator.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    PATHS,
    chdb_at,
    column_types,
    create_target,
    query_rows,
    refused_before_arming,
    run,
    served,
    server_connection,
    target_for,
    tds_rows_in,
    write_manifest,
)

SQLITE_SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: events"
BY_DAY = "{kind: day, column: day}"
#: the source's note and flag are nullable (no NOT NULL); the owner declared them without Nullable
NOT_NULLABLE = "id Int64, day Date, note String, flag UInt8"
READ_BACK = "SELECT id, toString(day), note, flag FROM {table} ORDER BY id"


def make_events(path: Path, days: Sequence[str], *, null_note_on: str | None = None) -> list[tuple[Any, ...]]:
    """``events``: nullable ``note`` and ``flag`` columns, with no NULL unless ``null_note_on`` (a day)."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, day DATE NOT NULL, note TEXT, flag BOOLEAN)"
        )
        start = conn.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]
        rows = [
            (start + i, day, "" if i % 5 == 0 else f"note {i}", i % 2)
            for i, day in enumerate((d for d in days for _ in range(30)), start=1)
        ]
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
        if null_note_on is not None:
            conn.execute("UPDATE events SET note = NULL WHERE day = ? AND id % 7 = 0", (null_note_on,))
        return [tuple(r) for r in conn.execute("SELECT id, day, note, flag FROM events ORDER BY id")]


def events_manifest(
    base: Path, connection: str, table: str, export: str = "lazy_plan", load: str = "direct"
) -> Path:
    return write_manifest(
        base,
        source=SQLITE_SOURCE,
        partitioning=BY_DAY,
        connection=connection,
        table=table,
        export=export,
        load=load,
    )


def loads_without_nullable(
    base: Path, endpoint: EndpointDescriptor, connection: str, table: str, export: str, load: str
) -> None:
    source = make_events(base / "source.sqlite", ["2026-11-01", "2026-11-02", "2026-11-03"])
    create_target(endpoint, table, NOT_NULLABLE, "(day, id)")
    manifest = events_manifest(base, connection, table, export, load)
    assert run(manifest, "r1").rows_committed == len(source)
    assert query_rows(endpoint, READ_BACK.format(table=table)) == source  # '' stays '', 0 stays 0
    assert column_types(endpoint, table) == {"id": "Int64", "day": "Date", "note": "String", "flag": "UInt8"}
    assert run(manifest, "r2").rows_committed == 0


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_every_path_loads_a_nullable_column_without_nulls_into_a_column_without_nullable_on_chdb(
    tmp_path: Path, export: str, load: str
) -> None:
    loads_without_nullable(tmp_path, chdb_at(tmp_path), CHDB_CONNECTION, "demo.events", export, load)


@pytest.mark.parametrize(
    ("export", "load"), [("lazy_plan", "direct"), ("lazy_plan", "staged"), ("file_artifact", "direct")]
)
def test_a_nullable_column_without_nulls_lands_in_a_column_without_nullable_on_the_http_server(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    export: str,
    load: str,
) -> None:
    connection = server_connection(clickhouse_http, monkeypatch, "null_free_clickhouse")
    loads_without_nullable(
        tmp_path, clickhouse_http, connection, f"nf_{uuid.uuid4().hex[:8]}.events", export, load
    )


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_null_in_the_rows_to_move_stops_the_run_before_arming_naming_the_column(
    tmp_path: Path, load: str
) -> None:
    make_events(tmp_path / "source.sqlite", ["2026-11-01", "2026-11-02"], null_note_on="2026-11-02")
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, "demo.events", NOT_NULLABLE, "(day, id)")
    manifest = events_manifest(tmp_path, CHDB_CONNECTION, "demo.events", load=load)
    stopped = refused_before_arming(manifest, endpoint, "demo.events")
    assert stopped.details["problems"] == [
        {
            "column": "note",
            "reason": "holds NULL in the rows to move; the target column is not Nullable",
            "rows": 4,  # ids 35, 42, 49, 56 of the second day
        }
    ]
    assert "'note'" in stopped.render() and "4 row(s)" in stopped.render()


def test_a_null_outside_the_partitions_moved_does_not_stop_the_run(tmp_path: Path) -> None:
    make_events(tmp_path / "source.sqlite", ["2026-11-01"])
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, "demo.events", NOT_NULLABLE, "(day, id)")
    manifest = events_manifest(tmp_path, CHDB_CONNECTION, "demo.events")
    assert run(manifest, "r1").rows_committed == 30
    # a late NULL in the committed day (an append route does not move it again) and a new day without one
    with sqlite3.connect(tmp_path / "source.sqlite") as conn:
        conn.execute("UPDATE events SET note = NULL WHERE id = 3")
    source = make_events(tmp_path / "source.sqlite", ["2026-11-02"])
    assert run(manifest, "r2").rows_committed == 30
    moved = [row for row in source if row[1] == "2026-11-02"]
    assert query_rows(endpoint, READ_BACK.format(table="demo.events"))[30:] == moved


@pytest.mark.parametrize(
    ("export", "load"), [("lazy_plan", "direct"), ("lazy_plan", "staged"), ("file_artifact", "direct")]
)
@pytest.mark.parametrize("target", ["chdb", "server"])
def test_a_null_that_arrives_after_the_count_is_refused_never_written_as_a_default(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    export: str,
    load: str,
    target: str,
) -> None:
    """The count is made to miss the NULLs (a row changed after it): the export files, the staging insert or
    the load must refuse them."""

    def counted_too_early(
        self: SqliteSource, bounds: Sequence[PartitionBounds], columns: Sequence[str]
    ) -> dict[str, int]:
        return dict.fromkeys(columns, 0)

    monkeypatch.setattr(SqliteSource, "count_nulls", counted_too_early)
    make_events(tmp_path / "source.sqlite", ["2026-11-01"], null_note_on="2026-11-01")
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "events")
    create_target(endpoint, table, NOT_NULLABLE, "(day, id)")
    with pytest.raises(DponeError) as failed:
        run(events_manifest(tmp_path, connection, table, export=export, load=load), "r1")
    # the export's files refuse it (before arming), else the staging insert (before arming) or the load
    expected = ErrorCode.ARTIFACT_INVALID if export == "file_artifact" else ErrorCode.TARGET_LOAD_FAILED
    assert failed.value.code is expected
    assert query_rows(endpoint, f"SELECT count() FROM {table}") == [(0,)]  # no NULL became ''


# -- SQL Server: every column nullable in its catalog ---------------------------------------------------------

TDS_COLUMNS = "id Int64, order_date DateTime, customer {customer}, amount Float64, updated_at DateTime"


@pytest.mark.parametrize("target", ["chdb", "server"])
def test_sql_server_columns_without_nulls_load_into_columns_without_nullable(
    tmp_path: Path,
    tds_orders_source: str,
    tds_orders: list[dict[str, Any]],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
) -> None:
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "tds_orders")
    create_target(endpoint, table, TDS_COLUMNS.format(customer="Nullable(String)"), "(order_date, id)")
    manifest = write_manifest(
        tmp_path,
        source=tds_orders_source,
        partitioning="{kind: day, column: order_date}",
        connection=connection,
        table=table,
    )
    assert run(manifest, "r1").rows_committed == len(tds_orders)
    assert tds_rows_in(endpoint, table) == served(tds_orders)
    assert column_types(endpoint, table)["id"] == "Int64"


def test_a_sql_server_column_holding_null_is_refused_for_a_column_without_nullable(
    tmp_path: Path, tds_orders_source: str, tds_orders: list[dict[str, Any]]
) -> None:
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, "demo.tds_orders", TDS_COLUMNS.format(customer="String"), "(order_date, id)")
    manifest = write_manifest(
        tmp_path,
        source=tds_orders_source,
        partitioning="{kind: day, column: order_date}",
        connection=CHDB_CONNECTION,
        table="demo.tds_orders",
    )
    stopped = refused_before_arming(manifest, endpoint, "demo.tds_orders")
    nulls = sum(1 for r in tds_orders if r["customer"] is None)
    assert [(p["column"], p["rows"]) for p in stopped.details["problems"]] == [("customer", nulls)]
