"""A hand-made target whose columns hold every source value exactly, in a wider type, is loaded value for value.

Data teams declare their tables before the first run, often wider than the source: ``Int64`` for SQL
Server's ``int``, ``Decimal(18, 2)`` for a ``decimal(12, 2)``. Such a table was refused as "of a different
type". Now an integer lands in a wider one (an unsigned one also in a signed one of more bits), a decimal
in one with at least its digits on both sides of the point, and every path writes each value as the target
column's type (at its scale). Every target value is compared with the source's, on chDB and on the 18.16
server, from SQLite and from SQL Server (pymssql over the TDS emulator). A column that would not hold every
value (narrower, fewer digits on either side, NULL into a non-nullable one) is still refused before arming.
"""

from __future__ import annotations

import sqlite3
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
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

SQLITE_SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: readings"
BY_DAY = "{kind: day, column: day}"
#: the source maps to id Int64, day Date, flag Nullable(UInt8), amount Decimal(12, 2), fee
#: Nullable(Decimal(12, 2)); the owner declared flag, amount and fee wider: more digits, or more digits on
#: both sides of the point (each value is then written at the target's scale)
WIDER = "id Int64, day Date, flag Nullable(Int16), amount Decimal(18, 2), fee Nullable(Decimal(38, 2))"
WIDER_SCALE = "id Int64, day Date, flag Nullable(UInt64), amount Decimal(18, 4), fee Nullable(Decimal(38, 6))"
AMOUNTS = ["9999999999.99", "-9999999999.99", "0", "0.01", "1234.5", "42", "-0.07"]
READ_BACK = "SELECT id, toString(day), flag, toString(amount), toString(fee) FROM {table} ORDER BY id"


def make_readings(path: Path) -> list[tuple[Any, ...]]:
    """``readings``: a flag (0, 1, NULL) and two decimals at the edges of ``NUMERIC(12, 2)``."""
    rows = []
    for i in range(1, 141):
        flag = (None, 0, 1)[i % 3]
        amount = AMOUNTS[i % len(AMOUNTS)]
        fee = None if i % 4 == 0 else AMOUNTS[(i + 3) % len(AMOUNTS)]
        rows.append((i, f"2026-11-0{1 + i % 5}", flag, amount, fee))
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE readings (id INTEGER PRIMARY KEY, day DATE NOT NULL, flag BOOLEAN, "
            "amount NUMERIC(12,2) NOT NULL, fee NUMERIC(12,2))"
        )
        conn.executemany("INSERT INTO readings VALUES (?, ?, ?, ?, ?)", rows)
    return [
        (i, day, flag, Decimal(amount), None if fee is None else Decimal(fee))
        for i, day, flag, amount, fee in rows
    ]


def readings_in(endpoint: EndpointDescriptor, table: str) -> list[tuple[Any, ...]]:
    """The target's rows with decimals as exact ``Decimal`` values (how many trailing zeros a server
    prints is not a value)."""
    return [
        (i, day, flag, Decimal(amount), None if fee is None else Decimal(fee))
        for i, day, flag, amount, fee in query_rows(endpoint, READ_BACK.format(table=table))
    ]


def loads_wider(
    base: Path,
    endpoint: EndpointDescriptor,
    connection: str,
    table: str,
    export: str,
    load: str,
    strategy: str,
    columns: str = WIDER,
) -> None:
    source = make_readings(base / "source.sqlite")
    create_target(endpoint, table, columns, "(day, id)")
    declared = column_types(endpoint, table)
    manifest = write_manifest(
        base,
        source=SQLITE_SOURCE,
        partitioning=BY_DAY,
        connection=connection,
        table=table,
        export=export,
        load=load,
        strategy=strategy,
    )
    assert run(manifest, "r1").rows_committed == len(source)
    assert readings_in(endpoint, table) == source
    assert column_types(endpoint, table) == declared
    assert run(manifest, "r2" if strategy != "full_refresh" else "r1").rows_committed == 0
    assert readings_in(endpoint, table) == source


@pytest.mark.parametrize(
    ("export", "load"),
    [
        ("lazy_plan", "direct"),
        ("lazy_plan", "staged"),
        ("file_artifact", "direct"),
        ("file_artifact", "staged"),
    ],
)
@pytest.mark.parametrize("columns", [WIDER, WIDER_SCALE])
def test_every_path_loads_integers_and_decimals_into_wider_columns_exactly_on_chdb(
    tmp_path: Path, export: str, load: str, columns: str
) -> None:
    loads_wider(
        tmp_path,
        chdb_at(tmp_path),
        CHDB_CONNECTION,
        "demo.readings",
        export,
        load,
        "incremental_append",
        columns,
    )


@pytest.mark.parametrize("strategy", ["full_refresh", "replace_partition"])
def test_replacing_strategies_keep_the_wider_table_and_its_values_on_chdb(
    tmp_path: Path, strategy: str
) -> None:
    loads_wider(
        tmp_path, chdb_at(tmp_path), CHDB_CONNECTION, "demo.readings", "lazy_plan", "staged", strategy
    )


@pytest.mark.parametrize(
    ("export", "load"), [("lazy_plan", "direct"), ("lazy_plan", "staged"), ("file_artifact", "direct")]
)
@pytest.mark.parametrize("columns", [WIDER, WIDER_SCALE])
def test_integers_and_decimals_land_in_wider_columns_exactly_on_the_http_server(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    export: str,
    load: str,
    columns: str,
) -> None:
    connection = server_connection(clickhouse_http, monkeypatch, "wide_clickhouse")
    table = f"wide_{uuid.uuid4().hex[:8]}.readings"
    loads_wider(tmp_path, clickhouse_http, connection, table, export, load, "replace_partition", columns)


@pytest.mark.parametrize(
    ("columns", "refused"),
    [
        # SQLite's INTEGER is Int64: an Int32 column would not hold every value
        (
            "id Int32, day Date, flag Nullable(UInt8), amount Decimal(12, 2), fee Nullable(Decimal(12, 2))",
            "id",
        ),
        # fewer digits after the point: 0.01 would be rounded
        (
            "id Int64, day Date, flag Nullable(UInt8), amount Decimal(18, 1), fee Nullable(Decimal(12, 2))",
            "amount",
        ),
        # fewer digits before it: 9999999999.99 would not fit
        (
            "id Int64, day Date, flag Nullable(UInt8), amount Decimal(12, 4), fee Nullable(Decimal(12, 2))",
            "amount",
        ),
        (
            "id Int64, day Date, flag Nullable(UInt8), amount Decimal(10, 2), fee Nullable(Decimal(12, 2))",
            "amount",
        ),
        # an unsigned flag into a signed column of the same width
        (
            "id Int64, day Date, flag Nullable(Int8), amount Decimal(12, 2), fee Nullable(Decimal(12, 2))",
            "flag",
        ),
        # the nullable fee into a column that cannot hold NULL
        ("id Int64, day Date, flag Nullable(UInt8), amount Decimal(12, 2), fee Decimal(38, 2)", "fee"),
    ],
)
def test_a_column_that_would_not_hold_every_value_is_refused_before_arming(
    tmp_path: Path, columns: str, refused: str
) -> None:
    make_readings(tmp_path / "source.sqlite")
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, "demo.readings", columns, "(day, id)")
    manifest = write_manifest(
        tmp_path, source=SQLITE_SOURCE, partitioning=BY_DAY, connection=CHDB_CONNECTION, table="demo.readings"
    )
    stopped = refused_before_arming(manifest, endpoint, "demo.readings")
    assert [p["column"] for p in stopped.details["problems"]] == [refused]


# -- SQL Server: ``int`` (Int32) into the Int64 most hand-made tables declare -------------------------------

TDS_TARGET_COLUMNS = (
    "id Nullable(Int64), order_date Nullable(DateTime), customer LowCardinality(Nullable(String)), "
    "amount Nullable(Float64), updated_at Nullable(DateTime)"
)


@pytest.mark.parametrize("target", ["chdb", "server"])
def test_sql_server_int_lands_in_a_hand_made_int64_column_value_for_value(
    tmp_path: Path,
    tds_orders_source: str,
    tds_orders: list[dict[str, Any]],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
) -> None:
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "tds_orders")
    create_target(endpoint, table, TDS_TARGET_COLUMNS, "tuple()")
    manifest = write_manifest(
        tmp_path,
        source=tds_orders_source,
        partitioning="{kind: day, column: order_date}",
        connection=connection,
        table=table,
    )
    assert run(manifest, "r1").rows_committed == len(tds_orders)
    assert tds_rows_in(endpoint, table) == served(tds_orders)
    assert column_types(endpoint, table)["id"] == "Nullable(Int64)"
    assert run(manifest, "r2").rows_committed == 0
    assert tds_rows_in(endpoint, table) == served(tds_orders)
