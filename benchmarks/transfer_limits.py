"""The two engine limits the issue compares dpone with (the orders shape, SQLite source).

- ``limit_chdb``: chDB pulls the same rows itself, ``INSERT INTO ... SELECT ... FROM sqlite(path, table)``,
  converting in the engine (amounts parsed from their text, so exact: the checksum proves it). No Python
  touches a row: this is what the embedded engine reaches on this machine.
- ``limit_http``: the same rows, converted and encoded in clickhouse-connect's Native format *before*
  the clock starts, then sent to the server in one POST. The clock covers the request and the server
  parsing and writing the rows: what the 18.16 server reaches.
"""

from __future__ import annotations

import http.client
import sqlite3
from operator import itemgetter
from typing import Any

from clock import Clock
from transfer_raw import open_target, prepare_table, sqlite_converters


def run_limit_chdb(spec: dict[str, Any]) -> dict[str, Any]:
    import chdb  # noqa: F401 - imported before the clock
    import clickhouse_connect  # noqa: F401

    client = open_target(spec["target"])
    try:
        prepare_table(client, spec["ddl"], spec["target_table"])
        source = spec["source_path"].replace("'", "\\'")
        clock = Clock()
        client.command(
            f"INSERT INTO {spec['target_table']} SELECT id, toDate(order_date), customer, "
            f"toDecimal64(toString(amount), 2), parseDateTimeBestEffort(updated_at, 'UTC') "
            f"FROM sqlite('{source}', '{spec['source_table']}')"
        )
        seconds, cpu = clock.seconds(), clock.cpu_seconds()
        rows = int(client.query(f"SELECT count() FROM {spec['target_table']}").result_rows[0][0])
    finally:
        client.close()
    return {"rows": rows, "seconds": seconds, "cpu_seconds": cpu}


def _native_body(client: Any, spec: dict[str, Any]) -> tuple[bytes, int]:
    """The whole table as one Native insert body (query line included), built outside the clock."""
    from clickhouse_connect.driver.transform import NativeTransform

    db = sqlite3.connect(f"file:{spec['source_path']}?mode=ro", uri=True)
    try:
        rows = db.execute(f"SELECT {', '.join(spec['columns'])} FROM {spec['source_table']}").fetchall()
    finally:
        db.close()
    columns: list[list[Any]] = []
    for index, convert in enumerate(sqlite_converters(spec["types"])):
        values = list(map(itemgetter(index), rows))
        columns.append(convert(values) if convert is not None else values)
    context = client.create_insert_context(
        spec["target_table"],
        column_names=spec["columns"],
        column_type_names=spec["types"],
        column_oriented=True,
        data=columns,
    )
    context.compression = None
    return b"".join(NativeTransform.build_insert(context)), len(rows)


def run_limit_http(spec: dict[str, Any]) -> dict[str, Any]:
    client = open_target(spec["target"])
    try:
        prepare_table(client, spec["ddl"], spec["target_table"])
        body, rows = _native_body(client, spec)
    finally:
        client.close()
    connection = http.client.HTTPConnection("127.0.0.1", spec["target"]["port"], timeout=600)
    try:
        clock = Clock()
        connection.request("POST", "/?user=default", body=body)
        response = connection.getresponse()
        answer = response.read()
        seconds, cpu = clock.seconds(), clock.cpu_seconds()
    finally:
        connection.close()
    if response.status != 200:
        raise RuntimeError(f"the server refused the Native insert: HTTP {response.status} {answer[:200]!r}")
    return {"rows": rows, "seconds": seconds, "cpu_seconds": cpu, "body_mb": round(len(body) / 1e6, 1)}
