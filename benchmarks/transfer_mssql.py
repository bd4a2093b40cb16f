"""The SQL Server source over the TDS emulator: a bare pymssql fetch against dpone reading the same rows.

Both systems read ``dbo.large_orders`` from one emulator (``tds_emulator.py --large-rows N``, started by
the harness) with the *same* statement: the one ``MssqlSource.read()`` sends for the route's only
partition (``partitioning: none``: ``SELECT`` of every column ``ORDER BY [id]``), rendered by dpone's own
T-SQL builder before the clock. The emulator is pure Python and evaluates every ``WHERE`` row by row
(about 12 s per day partition of a 1M-row table against 9 s for the whole table), so day partitions would
measure the emulator's predicate evaluator 60 times, not the source read; a real server uses an index.

- ``pymssql_fetch``: connect, execute, ``fetchmany(chunk_rows)`` until empty, count the rows. Nothing else.
- ``dpone_mssql``: a real ``dpone`` run (``lazy_plan + direct``, ``full_refresh``) into chDB, measured like
  the SQLite systems (``transfer_dpone.run_dpone``: manifest load, describe, audit, plan, guard, read,
  conversions, insert, commit, evidence); its target's checksum is compared with the generator's.
- ``mssql_read``: ``MssqlSource.read()`` over every planned partition with its conversions, no target
  (what the source port itself costs; the checksum is taken from the chunks after the clock).
"""

from __future__ import annotations

import importlib
import sys
from datetime import date, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

from clock import Clock

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "services"
FIELDS = ("rows", "sum_id", "sum_amount_cents", "sum_order_days", "sum_updated_epoch", "sum_customer_chars")

#: Over the emulator ``order_date`` arrives as a datetime and ``amount`` as a float (its wire types), so
#: the target holds DateTime and Float64 columns; cents and days are taken from those.
TARGET_SQL = (
    "SELECT count(), sum(id), sum(toInt64(round(amount * 100))), sum(toUInt32(toDate(order_date))), "
    "sum(toUInt32(updated_at)), sum(lengthUTF8(customer)) FROM {table}"
)

MANIFEST_TEMPLATE = """\
kind: native_transfer
name: bench_mssql
source:
  type: mssql
  connection: {connection}
  table: dbo.{table}
  partitioning:
    kind: none
  chunk_rows: {chunk_rows}
sink:
  type: clickhouse
  connection: {sink}
  table: {target_table}
  strategy: full_refresh
  load: direct
  order_by: [id]
checkpoints:
  connection: sqlite:///{state}
"""


def emulator() -> Any:
    """``scripts/services/tds_emulator.py`` as a module (its generator is the reference)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    return importlib.import_module("tds_emulator")


def reference_checksum(rows: int) -> dict[str, int]:
    """What every system must have read from ``large_orders`` with ``rows`` rows (from the generator)."""
    generate = emulator().large_order_row
    epoch_day = date(1970, 1, 1)
    totals = [0] * len(FIELDS)
    for i in range(1, rows + 1):
        _, day, customer, amount, moment = generate(i)
        totals[0] += 1
        totals[1] += i
        totals[2] += int(amount * 100)
        totals[3] += (day - epoch_day).days
        totals[4] += int(moment.replace(tzinfo=timezone.utc).timestamp())
        totals[5] += len(customer) if customer is not None else 0
    return dict(zip(FIELDS, totals, strict=True))


def chunk_checksum(totals: list[int], names: tuple[str, ...], columns: tuple[Any, ...]) -> None:
    """Add one chunk (as ``MssqlSource.read()`` yields it) to running ``FIELDS`` totals."""
    by_name = dict(zip(names, columns, strict=True))
    totals[0] += len(by_name["id"])
    totals[1] += sum(by_name["id"])
    totals[2] += sum(round(Decimal(repr(v)) * 100) for v in by_name["amount"])
    totals[3] += sum((v.date() - date(1970, 1, 1)).days for v in by_name["order_date"])
    totals[4] += sum(int(v.replace(tzinfo=timezone.utc).timestamp()) for v in by_name["updated_at"])
    totals[5] += sum(len(v) for v in by_name["customer"] if v is not None)


def write_manifest(
    directory: Path, *, connection: str, table: str, sink: str, target_table: str, chunk_rows: int
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "manifest.yaml"
    path.write_text(
        MANIFEST_TEMPLATE.format(
            connection=connection,
            table=table,
            chunk_rows=chunk_rows,
            sink=sink,
            target_table=target_table,
            state="/" + str((directory / "state.sqlite").resolve()).lstrip("/"),
        ),
        encoding="utf-8",
    )
    return path


def _endpoint(spec: dict[str, Any]) -> Any:
    from pydantic import SecretStr

    from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind

    tds = spec["tds"]
    return EndpointDescriptor(
        name="bench_mssql",
        kind=EndpointKind.MSSQL,
        host=tds["host"],
        port=tds["port"],
        user=tds["user"],
        password=SecretStr(tds["password"]),
        database=tds["database"],
    )


def _source(spec: dict[str, Any]) -> Any:
    from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
    from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType

    table = f"dbo.{spec['source_table']}"
    return MssqlSource(
        _endpoint(spec), SourceSpec(type=SourceType.MSSQL, connection="bench_mssql", table=table)
    )


def source_statement(spec: dict[str, Any]) -> str:
    """The exact text ``MssqlSource.read()`` sends for the route's one partition (dpone's own builder)."""
    from airflow_provider_dpone.adapters.sources import mssql_sql as tsql
    from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

    source = _source(spec)
    try:
        schema = source.describe()
        order = source._order_by()
    finally:
        source.close()
    table = tsql.TableRef.parse(f"dbo.{spec['source_table']}")
    bounds = PartitionBounds(kind=BoundsKind.ALL, label="all")
    return tsql.select_rows(tsql.source_sql(table, None), schema.names, bounds, order).render()


def run_pymssql_fetch(spec: dict[str, Any]) -> dict[str, Any]:
    import pymssql

    statement = source_statement(spec)
    tds = spec["tds"]
    chunk_rows: int = spec["chunk_rows"]
    clock = Clock()
    connection = pymssql.connect(
        server=tds["host"],
        port=tds["port"],
        user=tds["user"],
        password=tds["password"],
        database=tds["database"],
        autocommit=True,
    )
    try:
        cursor = connection.cursor()
        cursor.execute(statement)
        rows = 0
        while batch := cursor.fetchmany(chunk_rows):
            rows += len(batch)
    finally:
        connection.close()
    return clock.result(rows, checksum={"rows": rows})


def run_mssql_read(spec: dict[str, Any]) -> dict[str, Any]:
    importlib.import_module("pymssql")
    source = _source(spec)
    totals = [0] * len(FIELDS)
    chunks = []
    clock = Clock()
    try:
        for bounds in source.plan_partitions():
            chunks.extend(source.read("bench", bounds, spec["chunk_rows"]))
    finally:
        source.close()
    result = clock.result(sum(c.row_count for c in chunks))
    for chunk in chunks:  # after the clock: the chunks are kept only to be checked
        chunk_checksum(totals, chunk.names, chunk.columns)
    result["checksum"] = dict(zip(FIELDS, totals, strict=True))
    return result


def run_dpone_mssql(spec: dict[str, Any]) -> dict[str, Any]:
    importlib.import_module("pymssql")
    importlib.import_module("airflow_provider_dpone.adapters.sources.mssql_source")
    from transfer_dpone import run_dpone
    from transfer_raw import open_target

    result = run_dpone({**spec, "target": "chdb"})
    client = open_target(spec["checksum_target"])
    try:
        values = client.query(TARGET_SQL.format(table=spec["target_table"])).result_rows[0]
    finally:
        client.close()
    result["checksum"] = dict(zip(FIELDS, (int(v or 0) for v in values), strict=True))
    return result
