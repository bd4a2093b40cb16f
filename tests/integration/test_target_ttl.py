"""A hand-made target with a TTL: rules that delete rows or reset values stop the run before arming.

A MergeTree TTL deletes expired rows in merges, and on insert already: loaded into a table declared with
``TTL day + INTERVAL 10 DAY``, days older than that were reported committed (exit 0) while the table held
none of their rows, and no later run brings them back. A column TTL resets the loaded values to the
column's default once it expires. Both are refused before arming, on every path, with nothing written and
no checkpoint; TTL rules that only move parts (``TO DISK`` / ``TO VOLUME``) or recompress them keep every
row and value, and those targets are loaded exactly. Real chDB tables, every value compared with the
source. (The 18.16 server predates TTLs.)
"""

from __future__ import annotations

import sqlite3
from datetime import date, timedelta
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
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
