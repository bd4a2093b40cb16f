"""The Airflow peers: what a DAG author would use instead of dpone, through the official hooks.

``generic_transfer`` — common-sql's ``GenericTransfer`` from the source connection into the ClickHouse
connection (``apache-airflow-providers-clickhousedb``'s ``ClickHouseHook``). Its ``insert_rows`` turns every
cell into a string and sends one ``INSERT ... VALUES`` per row (the hook does not set
``supports_executemany``). Against ClickHouse 18.16 the unmodified operator fails on the first row (a quoted
string for an ``Int64``); the measured variant differs only in a hook subclass whose ``_serialize_cell``
keeps the driver's value (booleans as 0/1: 18.16 knows no ``true``), so clickhouse-connect quotes each value
itself. The failure of the unmodified
operator is recorded in the result (``default_error``).

``hand_written`` — the best task a DAG author writes with the official hooks: rows read in pages through
the source hook's cursor, converted to the target's Python types per row, and inserted row-oriented in
one request per page. ``ClickHouseHook.bulk_insert_rows`` is tried first; with clickhouse-connect 1.6.0 it
cannot describe an 18.16 table (``ColumnDef`` rejects the old ``comment_expression`` column), so the task
falls back to the same call ``bulk_insert_rows`` makes, ``client.insert``, on the hook's client, with
explicit column types. Which one ran is recorded (``insert_api``).
"""

from __future__ import annotations

import logging
from decimal import Decimal
from functools import cached_property
from typing import Any

from clock import Clock


def _silence_airflow_logs() -> None:
    logging.disable(logging.WARNING)


def _row_converters(types: list[str]) -> list[tuple[int, Any]]:
    """(column index, function) for the columns whose SQLite values need a conversion."""
    from datetime import date, datetime

    converters: list[tuple[int, Any]] = []
    for index, full in enumerate(types):
        base = full[len("Nullable(") : -1] if full.startswith("Nullable(") else full
        if base == "Date":
            converters.append((index, date.fromisoformat))
        elif base == "DateTime":
            converters.append((index, datetime.fromisoformat))
        elif base.startswith("Decimal("):
            converters.append((index, lambda v: Decimal(str(v))))
    return converters


def _source_hook(spec: dict[str, Any]) -> Any:
    if spec["source"] == "sqlite":
        from airflow.providers.sqlite.hooks.sqlite import SqliteHook

        return SqliteHook(sqlite_conn_id=spec["source_conn_id"])
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    return PostgresHook(postgres_conn_id=spec["source_conn_id"])


def _select(spec: dict[str, Any], limit: int | None) -> str:
    sql = f"SELECT {', '.join(spec['columns'])} FROM {spec['source_table']}"
    return sql + (f" ORDER BY id LIMIT {limit}" if limit else "")


def _prepare(spec: dict[str, Any]) -> Any:
    from airflow.providers.clickhousedb.hooks.clickhouse import ClickHouseHook

    client = ClickHouseHook(clickhouse_conn_id=spec["target_conn_id"]).get_client()
    try:
        client.command(f"CREATE DATABASE IF NOT EXISTS {spec['target_table'].split('.')[0]}")
        client.command(f"DROP TABLE IF EXISTS {spec['target_table']}")
        client.command(spec["ddl"])
    finally:
        client.close()


def _count(spec: dict[str, Any]) -> int:
    from airflow.providers.clickhousedb.hooks.clickhouse import ClickHouseHook

    client = ClickHouseHook(clickhouse_conn_id=spec["target_conn_id"]).get_client()
    try:
        return int(client.query(f"SELECT count() FROM {spec['target_table']}").result_rows[0][0])
    finally:
        client.close()


def run_generic_transfer(spec: dict[str, Any]) -> dict[str, Any]:
    _silence_airflow_logs()
    from airflow.providers.clickhousedb.hooks.clickhouse import ClickHouseHook
    from airflow.providers.common.sql.operators.generic_transfer import GenericTransfer

    class TypedClickHouseHook(ClickHouseHook):  # type: ignore[misc]
        """Keeps each value as the source driver returned it; clickhouse-connect quotes it."""

        @staticmethod
        def _serialize_cell(cell: Any, conn: Any = None) -> Any:
            return int(cell) if isinstance(cell, bool) else cell  # 18.16 has no true/false literals

    class TypedGenericTransfer(GenericTransfer):  # type: ignore[misc]
        @cached_property
        def destination_hook(self) -> Any:
            return TypedClickHouseHook(clickhouse_conn_id=self.destination_conn_id)

    _source_hook(spec)  # provider imports before the clock
    _prepare(spec)
    default_error = None
    try:  # the unmodified operator, one row: does it work at all against this server?
        GenericTransfer(
            task_id="generic_transfer_default",
            sql=_select(spec, 1),
            destination_table=spec["target_table"],
            source_conn_id=spec["source_conn_id"],
            destination_conn_id=spec["target_conn_id"],
        ).execute(context={})
    except Exception as exc:
        default_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    _prepare(spec)

    limit = spec.get("rows_cap")
    operator = TypedGenericTransfer(
        task_id="generic_transfer",
        sql=_select(spec, limit),
        destination_table=spec["target_table"],
        source_conn_id=spec["source_conn_id"],
        destination_conn_id=spec["target_conn_id"],
    )
    clock = Clock()
    operator.execute(context={})
    result = clock.result(limit or 0, default_error=default_error)
    result["rows"] = _count(spec)
    return result


def run_hand_written(spec: dict[str, Any]) -> dict[str, Any]:
    _silence_airflow_logs()
    from airflow.providers.clickhousedb.hooks.clickhouse import ClickHouseHook

    source_hook = _source_hook(spec)
    columns: list[str] = spec["columns"]
    types: list[str] = spec["types"]
    page_rows: int = spec["chunk_rows"]
    table: str = spec["target_table"]
    converters = _row_converters(types) if spec["source"] == "sqlite" else []
    _prepare(spec)

    clock = Clock()
    hook = ClickHouseHook(clickhouse_conn_id=spec["target_conn_id"])
    connection = source_hook.get_conn()
    # PostgreSQL: a named (server-side) cursor, so pages stream instead of the whole result being fetched.
    cursor = (
        connection.cursor(name="bench_hand_written") if spec["source"] == "postgres" else connection.cursor()
    )
    cursor.execute(_select(spec, None))
    client = None
    insert_api = "ClickHouseHook.bulk_insert_rows"
    rows = 0
    try:
        while page := cursor.fetchmany(page_rows):
            if converters:
                converted = []
                for row in page:
                    values = list(row)
                    for index, convert in converters:
                        value = values[index]
                        if value is not None:
                            values[index] = convert(value)
                    converted.append(values)
                page = converted
            if client is None and insert_api == "ClickHouseHook.bulk_insert_rows":
                try:
                    hook.bulk_insert_rows(table, page, columns)
                    rows += len(page)
                    continue
                except TypeError:
                    # clickhouse-connect 1.6.0 cannot DESCRIBE an 18.16 table; nothing was sent
                    insert_api = "ClickHouseHook.get_client().insert (column types given)"
                    client = hook.get_client()
            if client is None:
                hook.bulk_insert_rows(table, page, columns)
            else:
                client.insert(table, page, column_names=columns, column_type_names=types)
            rows += len(page)
    finally:
        if client is not None:
            client.close()
        connection.close()
    return clock.result(rows, insert_api=insert_api)


def run_peer(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["kind"] == "generic_transfer":
        return run_generic_transfer(spec)
    return run_hand_written(spec)
