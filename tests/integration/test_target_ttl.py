"""A hand-made target with a TTL: rules that delete rows or reset values stop the run before arming.

A MergeTree TTL deletes expired rows in merges, and on insert already: loaded into a table declared with
``TTL day + INTERVAL 10 DAY``, days older than that were reported committed (exit 0) while the table held
none of their rows, and no later run brings them back. A column TTL resets the loaded values to the
column's default once it expires. Both are refused before arming, on every path, with nothing written and
no checkpoint; TTL rules that only move parts (``TO DISK`` / ``TO VOLUME``) or recompress them keep every
row and value, and those targets are loaded exactly. Real chDB tables, every value compared with the
source. (The 18.16 server predates TTLs.) A retention table (``allow_target_ttl``) is loaded; a direct load
into it still counts its armed partitions after its last insert, and lets only its history all go (ADR 0091).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from tests.builders import permit_for
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    PATHS,
    chdb_at,
    create_target,
    query_rows,
    refused_before_arming,
    run,
    write_manifest,
)
from tests.integration.test_clickhouse_sink_http import day_bounds

TABLE = "demo.orders"
SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: orders"
PARTITIONING = "{kind: day, column: order_date}"
COLUMNS = "id Int64, order_date Date, customer String"
KEY = "(order_date, id)"
FIRST_DAY = date(2026, 10, 1)  # long expired for any TTL of a few days


def make_source(path: Path) -> list[tuple[int, str, str]]:
    rows = [(i, (FIRST_DAY + timedelta(days=i % 4)).isoformat(), f"customer-{i % 7}") for i in range(1, 121)]
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT NOT NULL)"
        )
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?)", rows)
    return rows


def target_rows(endpoint: EndpointDescriptor) -> list[tuple[object, ...]]:
    return query_rows(endpoint, f"SELECT id, toString(order_date), customer FROM {TABLE} ORDER BY id")


def route(base: Path, columns: str, key: str, export: str = "lazy_plan", load: str = "direct") -> Path:
    create_target(chdb_at(base), TABLE, columns, key)
    return write_manifest(
        base,
        source=SOURCE,
        partitioning=PARTITIONING,
        connection=CHDB_CONNECTION,
        table=TABLE,
        export=export,
        load=load,
    )


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_an_expiring_table_ttl_stops_every_path_before_arming(tmp_path: Path, export: str, load: str) -> None:
    make_source(tmp_path / "source.sqlite")
    manifest = route(tmp_path, COLUMNS, f"{KEY} TTL order_date + INTERVAL 10 DAY", export, load)
    err = refused_before_arming(manifest, chdb_at(tmp_path), TABLE)
    assert "TTL that deletes rows" in err.safe_message and err.details["problem"] == "table_ttl"
    # a TTL added after commits may have expired rows already, which no later run sees whole: say so
    assert any("already" in line and "reload" in line for line in err.hint_lines)
    assert "A TTL on the target" in err.hint_lines[-1]


@pytest.mark.parametrize(
    "ttl",
    [
        "TTL order_date + INTERVAL 100 YEAR",  # nothing expired yet: refused for what it will do
        "TTL order_date + INTERVAL 10 DAY DELETE WHERE customer = 'customer-1'",
        "TTL order_date + INTERVAL 10 DAY TO VOLUME 'default', order_date + INTERVAL 100 YEAR",
    ],
    ids=["not-yet-expired", "delete-where", "move-then-delete"],
)
def test_any_deleting_ttl_rule_is_refused(tmp_path: Path, ttl: str) -> None:
    make_source(tmp_path / "source.sqlite")
    manifest = route(tmp_path, COLUMNS, f"{KEY} {ttl}")
    refused_before_arming(manifest, chdb_at(tmp_path), TABLE)


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_column_ttl_on_a_column_the_route_writes_is_refused_naming_it(tmp_path: Path, load: str) -> None:
    make_source(tmp_path / "source.sqlite")
    columns = "id Int64, order_date Date, customer String TTL order_date + INTERVAL 1 DAY"
    manifest = route(tmp_path, columns, KEY, load=load)
    err = refused_before_arming(manifest, chdb_at(tmp_path), TABLE)
    assert "column 'customer' is declared with a TTL" in err.safe_message
    # values it already reset keep their count: no later run can see them
    assert any("values it reset" in line for line in err.hint_lines)


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_ttl_rules_that_only_move_or_recompress_parts_keep_every_row_and_value(
    tmp_path: Path, export: str, load: str
) -> None:
    source = make_source(tmp_path / "source.sqlite")
    ttl = (
        "TTL order_date + INTERVAL 1 DAY TO VOLUME 'default', order_date + INTERVAL 2 DAY TO DISK 'default', "
        "order_date + INTERVAL 3 DAY RECOMPRESS CODEC(ZSTD(3))"
    )
    manifest = route(tmp_path, COLUMNS, f"{KEY} {ttl}", export, load)
    endpoint = chdb_at(tmp_path)

    assert run(manifest, "r1").rows_committed == len(source)
    client = open_client(endpoint)
    try:
        client.command(f"OPTIMIZE TABLE {TABLE} FINAL")  # the TTL rules applied
    finally:
        client.close()
    assert target_rows(endpoint) == source
    assert run(manifest, "r2").rows_committed == 0
    assert target_rows(endpoint) == source


def allowing_ttl(manifest: Path) -> Path:
    """``manifest`` with ``sink.options.allow_target_ttl: true`` (a retention table's owner said so)."""
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("  load: ", "  options:\n    allow_target_ttl: true\n  load: ", 1), encoding="utf-8"
    )
    return manifest


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_retention_table_is_loaded_when_the_manifest_allows_target_ttls(tmp_path: Path, load: str) -> None:
    """A TTL that has not expired for the rows moved, on the table and on a written column: every row
    arrives as the source holds it; without the option the same table is refused."""
    source = make_source(tmp_path / "source.sqlite")
    columns = "id Int64, order_date Date, customer String TTL order_date + INTERVAL 100 YEAR"
    manifest = route(tmp_path, columns, f"{KEY} TTL order_date + INTERVAL 100 YEAR", load=load)
    refused_before_arming(manifest, chdb_at(tmp_path), TABLE)

    allowing_ttl(manifest)
    assert run(manifest, "r1").rows_committed == len(source)
    assert target_rows(chdb_at(tmp_path)) == source
    assert run(manifest, "r2").rows_committed == 0


# -- a retention table changed during a direct load (the sink alone, in the process holding chDB) -------------

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date", nullable=False),
        ColumnSpec(name="customer", clickhouse_type="String", nullable=False),
    )
)
HISTORY, NEW = date(2026, 11, 29), date(2026, 11, 30)  # younger than the TTL below


def day_chunk(first_id: int, rows: int, day: date) -> ColumnChunk:
    ids = list(range(first_id, first_id + rows))
    return ColumnChunk(
        partition_id="p",
        names=SCHEMA.names,
        columns=(ids, [day] * rows, [f"c{i}" for i in ids]),
        row_count=rows,
    )


@pytest.mark.parametrize("ttl", ["", " TTL order_date + INTERVAL 100 YEAR"], ids=["no-ttl", "deleting-ttl"])
@pytest.mark.parametrize("when", ["before_first_insert", "between_inserts"])
def test_a_retention_table_truncated_during_a_direct_load_stops_it_unless_only_its_history_left(
    tmp_path: Path, ttl: str, when: str
) -> None:
    """With ``allow_target_ttl``, the armed day's count is still compared; only every row outside it gone is
    no change, and only where the table's TTL deletes rows (its history may all expire meanwhile)."""
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, TABLE, COLUMNS, KEY + ttl)
    sink = ClickHouseSink(endpoint, allow_ttl=True)
    try:
        history = permit_for(TABLE, Strategy.INCREMENTAL_APPEND, [day_bounds(HISTORY)])
        assert sink.load(history, TABLE, SCHEMA, [day_chunk(1, 100, HISTORY)]) == 100
        client = sink._client()

        def chunks() -> Iterator[ColumnChunk]:  # read once the sink pinned the table
            if when == "before_first_insert":
                client.command(f"TRUNCATE TABLE {TABLE}")
            yield day_chunk(1_000, 50, NEW)  # the first chunk is inserted at once
            if when == "between_inserts":
                client.command(f"TRUNCATE TABLE {TABLE}")
            yield day_chunk(1_050, 50, NEW)

        permit = permit_for(TABLE, Strategy.INCREMENTAL_APPEND, [day_bounds(NEW)])
        if when == "before_first_insert" and ttl:
            assert sink.load(permit, TABLE, SCHEMA, chunks()) == 100  # as if the history expired
            return
        with pytest.raises(DponeError) as stopped:
            sink.load(permit, TABLE, SCHEMA, chunks())  # between inserts, red before: loaded, exit 0
    finally:
        sink.close()
    assert stopped.value.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    problem = "rows_outside_emptied" if when == "before_first_insert" else "rows_missing"
    assert stopped.value.details["problem"] == problem
    assert stopped.value.details.get("table_ttl_deletes_rows", False) is bool(ttl)


def test_a_partition_older_than_the_ttl_of_a_retention_table_stops_a_direct_load(tmp_path: Path) -> None:
    """The option's condition is that partitions arrive younger than the TTL. Rows of one that does not are
    deleted by the TTL's merges (on chDB within moments of the insert, not always before the load's last
    read: here a merge is forced between two inserts): a direct load counts its armed partitions after its
    last insert and stops, blocked, where it was reported committed over an emptied day."""
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, TABLE, COLUMNS, f"{KEY} TTL order_date + INTERVAL 10 DAY")
    sink = ClickHouseSink(endpoint, allow_ttl=True)
    try:
        client = sink._client()

        def chunks() -> Iterator[ColumnChunk]:
            yield day_chunk(1, 50, FIRST_DAY)
            client.command(f"OPTIMIZE TABLE {TABLE} FINAL")  # the TTL's merge, at a fixed point
            yield day_chunk(51, 50, FIRST_DAY)

        permit = permit_for(TABLE, Strategy.INCREMENTAL_APPEND, [day_bounds(FIRST_DAY)])
        with pytest.raises(DponeError) as stopped:
            sink.load(permit, TABLE, SCHEMA, chunks())  # red before: 100 rows loaded, the day empty
    finally:
        sink.close()
    assert stopped.value.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    assert stopped.value.details["problem"] == "rows_missing"
    assert stopped.value.details["table_ttl_deletes_rows"] is True
    assert stopped.value.details["rows_within_after"] <= 50 < stopped.value.details["rows_inserted"] == 100
    assert "its TTL deleted them" in stopped.value.safe_message
