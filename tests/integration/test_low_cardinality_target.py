"""A target table declared by hand with ``LowCardinality(String)`` columns takes the source's strings exactly.

``LowCardinality`` is a dictionary encoding of the same values, common in hand-made ClickHouse tables. The
route writes ``String`` values into it on every path, keeps the table as its owner declared it, keeps a
NULL apart from an empty string, and a second run moves nothing. A source column that holds NULLs is
still refused for a ``LowCardinality(String)`` column (the NULL would become ``''``), and no other inner
type is accepted. Every target value is compared with the source's, row by row, on chDB and on the 18.16
server.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import date, timedelta
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    PATHS,
    chdb_at,
    column_types,
    create_target,
    query_rows,
    refused_before_arming,
    run,
    server_connection,
    write_manifest,
)

DAYS = 4
#: as the owner of the table declared it; the route writes String values into both encoded columns
TARGET_COLUMNS = (
    "id Int64, order_date Date, customer LowCardinality(String), note LowCardinality(Nullable(String))"
)
ORDER_BY = "(order_date, id)"
SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: orders"
PARTITIONING = "{kind: day, column: order_date}"
NOTES = [None, "", "late", "Müller & Söhne", "x" * 300, "  padded  ", "日本語"]


def make_source(path: Path) -> list[tuple[int, str, str, str | None]]:
    """``orders`` with a non-null text column and a nullable one (NULL, empty, long, non-ASCII)."""
    rows = []
    first = date(2026, 11, 1)
    for i in range(1, 241):
        day = (first + timedelta(days=i % DAYS)).isoformat()
        rows.append((i, day, f"customer-{i % 7}", NOTES[i % len(NOTES)]))
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT NOT NULL, "
            "note TEXT)"
        )
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", rows)
    return rows


def target_rows(endpoint: EndpointDescriptor, table: str) -> list[tuple[object, ...]]:
    return query_rows(endpoint, f"SELECT id, toString(order_date), customer, note FROM {table} ORDER BY id")


def moves_exactly(
    base: Path,
    endpoint: EndpointDescriptor,
    connection: str,
    table: str,
    export: str,
    load: str,
    strategy: str,
) -> None:
    source = make_source(base / "source.sqlite")
    create_target(endpoint, table, TARGET_COLUMNS, ORDER_BY)
    declared = column_types(endpoint, table)
    manifest = write_manifest(
        base,
        source=SOURCE,
        partitioning=PARTITIONING,
        connection=connection,
        table=table,
        export=export,
        load=load,
        strategy=strategy,
    )

    first = run(manifest, "r1")
    assert first.rows_committed == len(source)
    assert target_rows(endpoint, table) == source  # value for value, NULL apart from ''
    assert column_types(endpoint, table) == declared  # the owner's table, not one dpone made

    second = run(manifest, "r2" if strategy != "full_refresh" else "r1")
    assert second.rows_committed == 0
    assert target_rows(endpoint, table) == source


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_every_path_moves_strings_into_low_cardinality_columns_exactly_on_chdb(
    tmp_path: Path, export: str, load: str
) -> None:
    moves_exactly(
        tmp_path, chdb_at(tmp_path), CHDB_CONNECTION, "demo.orders", export, load, "incremental_append"
    )


@pytest.mark.parametrize("strategy", ["full_refresh", "replace_partition"])
@pytest.mark.parametrize("load", ["direct", "staged"])
def test_replacing_strategies_keep_the_low_cardinality_table_and_its_values_on_chdb(
    tmp_path: Path, load: str, strategy: str
) -> None:
    moves_exactly(tmp_path, chdb_at(tmp_path), CHDB_CONNECTION, "demo.orders", "lazy_plan", load, strategy)


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
@pytest.mark.parametrize(
    ("export", "load"), [("lazy_plan", "direct"), ("lazy_plan", "staged"), ("file_artifact", "direct")]
)
def test_low_cardinality_columns_take_the_source_strings_exactly_on_the_http_server(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    export: str,
    load: str,
    strategy: str,
) -> None:
    connection = server_connection(clickhouse_http, monkeypatch, "lc_clickhouse")
    table = f"lc_{uuid.uuid4().hex[:8]}.orders"
    moves_exactly(tmp_path, clickhouse_http, connection, table, export, load, strategy)


@pytest.mark.parametrize(
    ("columns", "refused"),
    [
        # the nullable source column into a non-nullable encoded one: its NULLs would read ''
        ("id Int64, order_date Date, customer LowCardinality(String), note LowCardinality(String)", "note"),
        # an inner type other than String is not accepted
        ("id LowCardinality(Int64), order_date Date, customer String, note Nullable(String)", "id"),
    ],
)
def test_low_cardinality_columns_that_cannot_hold_the_values_exactly_are_refused_before_writing(
    tmp_path: Path, columns: str, refused: str
) -> None:
    make_source(tmp_path / "source.sqlite")
    endpoint = chdb_at(tmp_path)
    client = open_client(endpoint)
    try:
        client.command("CREATE DATABASE IF NOT EXISTS demo")
        client.command(
            f"CREATE TABLE demo.orders ({columns}) ENGINE = MergeTree ORDER BY {ORDER_BY}",
            settings={"allow_suspicious_low_cardinality_types": 1},
        )
    finally:
        client.close()
    manifest = write_manifest(
        tmp_path, source=SOURCE, partitioning=PARTITIONING, connection=CHDB_CONNECTION, table="demo.orders"
    )
    stopped = refused_before_arming(manifest, endpoint, "demo.orders")
    assert [p["column"] for p in stopped.details["problems"]] == [refused]
