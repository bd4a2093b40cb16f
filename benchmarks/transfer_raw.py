"""The raw pipe: the same source read and the same ClickHouse insert, and nothing else.

No planner, no partitions, no checkpoints, no guard, no evidence: one ``SELECT`` of every column, rows
fetched ``chunk_rows`` at a time, turned into columns with the cheapest C-level conversions the target types
allow, and inserted with the same clickhouse-connect call dpone uses (column-oriented, explicit types).
That is the practical limit of this machine for this source, driver and target.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence
from datetime import date, datetime
from operator import itemgetter
from typing import Any

from clock import Clock

Convert = Callable[[list[Any]], list[Any]]


def _nullable(one: Callable[[Any], Any]) -> Convert:
    def convert(values: list[Any]) -> list[Any]:
        if None in values:
            return [None if v is None else one(v) for v in values]
        return list(map(one, values))

    return convert


def _decimal(scale: int) -> Convert:
    fmt = f"%.{scale}f"
    to_decimal = decimal.Decimal

    def one(value: Any) -> Any:
        return to_decimal(fmt % value) if type(value) is float else to_decimal(value)

    return _nullable(one)


def sqlite_converters(types: Sequence[str]) -> list[Convert | None]:
    """SQLite hands back ISO text for dates and REAL for decimals; everything else inserts as it is."""
    converters: list[Convert | None] = []
    for full in types:
        base = full[len("Nullable(") : -1] if full.startswith("Nullable(") else full
        if base == "Date":
            converters.append(_nullable(date.fromisoformat))
        elif base == "DateTime":
            converters.append(_nullable(datetime.fromisoformat))
        elif base.startswith("Decimal("):
            converters.append(_decimal(int(base[len("Decimal(") : -1].split(",")[1])))
        else:
            converters.append(None)
    return converters


def open_target(target: dict[str, Any]) -> Any:
    import clickhouse_connect

    if target["interface"] == "chdb":
        return clickhouse_connect.get_client(interface="chdb", path=target["path"])
    return clickhouse_connect.get_client(
        host="127.0.0.1", port=target["port"], username="default", compress=False
    )


def prepare_table(client: Any, ddl: str, table: str) -> None:
    client.command(f"CREATE DATABASE IF NOT EXISTS {table.split('.')[0]}")
    client.command(f"DROP TABLE IF EXISTS {table}")
    client.command(ddl)


def _sqlite_cursor(spec: dict[str, Any]) -> Any:
    import sqlite3

    db = sqlite3.connect(f"file:{spec['source_path']}?mode=ro", uri=True)
    return db.execute(f"SELECT {', '.join(spec['columns'])} FROM {spec['source_table']}")


def _postgres_cursor(spec: dict[str, Any]) -> Any:
    import psycopg2

    connection = psycopg2.connect(spec["source_dsn"])
    cursor = connection.cursor(name="bench_raw")  # server-side: rows stream, memory stays bounded
    cursor.itersize = spec["chunk_rows"]
    cursor.execute(f"SELECT {', '.join(spec['columns'])} FROM {spec['source_table']}")
    return cursor


def run_raw(spec: dict[str, Any]) -> dict[str, Any]:
    import clickhouse_connect  # noqa: F401 - imported before the clock, like dpone's child

    if spec["target"]["interface"] == "chdb":
        import chdb  # noqa: F401

    columns: list[str] = spec["columns"]
    types: list[str] = spec["types"]
    chunk_rows: int = spec["chunk_rows"]
    clock = Clock()
    client = open_target(spec["target"])
    try:
        prepare_table(client, spec["ddl"], spec["target_table"])
        if spec["source"] == "sqlite":
            cursor = _sqlite_cursor(spec)
            converters = sqlite_converters(types)
        else:
            cursor = _postgres_cursor(spec)
            converters = [None] * len(columns)  # psycopg2 returns date, datetime and Decimal already
        getters = [itemgetter(i) for i in range(len(columns))]
        rows = 0
        while batch := cursor.fetchmany(chunk_rows):
            data = []
            for getter, convert in zip(getters, converters, strict=True):
                values = list(map(getter, batch))
                data.append(convert(values) if convert is not None else values)
            client.insert(
                spec["target_table"],
                data,
                column_names=columns,
                column_type_names=types,
                column_oriented=True,
            )
            rows += len(batch)
    finally:
        client.close()
    return clock.result(rows)
