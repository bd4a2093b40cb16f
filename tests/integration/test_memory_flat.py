"""Memory stays flat: a load leaves no sent block alive behind clickhouse-connect's insert context.

clickhouse-connect's ``InsertContext`` sits in a reference cycle with its own bound method and, after an
insert, still references the block it sent. One context per insert meant every block lived until a full
garbage collection (file_artifact at 5M rows peaked at ~1.6 GB). The sink keeps one context per load and
empties it after each insert. These tests load many blocks with the collector off, on chDB and on the
18.16 server, then look at every ``InsertContext`` still alive: at most one per load, holding no rows —
and the target holds exactly the source's rows (count and sums), so reusing the context lost nothing.
The benchmark measures the RSS itself (``benchmarks/run.py``: ``rss_5m_over_1m_max``).
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from clickhouse_connect.driver.insert import InsertContext

from airflow_provider_dpone.adapters.clickhouse.sink import INSERT_BLOCK_ROWS, ClickHouseSink
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import (
    ClickHouseInterface,
    EndpointDescriptor,
    EndpointKind,
)
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

pytestmark = pytest.mark.service

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date"),
        ColumnSpec(name="customer", clickhouse_type="String"),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)"),
        ColumnSpec(name="updated_at", clickhouse_type="DateTime"),
    )
)
BLOCKS = 6
FIRST_DAY = date(2026, 10, 1)


def chunks() -> Iterator[ColumnChunk]:
    """BLOCKS full-size chunks (each one insert), ids 0..BLOCKS*INSERT_BLOCK_ROWS-1."""
    n = INSERT_BLOCK_ROWS
    for block in range(BLOCKS):
        ids = list(range(block * n, (block + 1) * n))
        day = FIRST_DAY + timedelta(days=block)
        yield ColumnChunk(
            partition_id=f"p{block}",
            names=SCHEMA.names,
            columns=(
                ids,
                [day] * n,
                [f"c{i % 97}" for i in ids],
                [Decimal(i % 10_000) / 100 for i in ids],
                [datetime(day.year, day.month, day.day, 8, 30)] * n,
            ),
            row_count=n,
        )


def expected() -> tuple[int, int, Decimal]:
    ids = range(BLOCKS * INSERT_BLOCK_ROWS)
    return len(ids), sum(ids), sum((Decimal(i % 10_000) / 100 for i in ids), Decimal(0))


def permit_for(table: str) -> TargetPermit:
    permit = TargetPermit(
        route=RouteIdentity(
            source_table="dbo.orders", target_table=table, strategy=Strategy.INCREMENTAL_APPEND
        ),
        checkpoint_batch_id="sha256:" + "9f" * 32,
        partitions=(),
    )
    permit._open_window()  # in product code only the guard lifecycle opens permits
    return permit


def live_contexts() -> list[InsertContext]:
    return [o for o in gc.get_objects() if isinstance(o, InsertContext)]


def holds_rows(context: InsertContext) -> bool:
    state = vars(context)
    return any(state.get(a) is not None for a in ("_block_columns", "_block_rows", "_data", "_raw_data"))


def load_with_the_collector_off(sink: ClickHouseSink, table: str, staged: bool) -> list[InsertContext]:
    gc.collect()
    before = {id(c) for c in live_contexts()}
    gc.disable()
    try:
        if staged:
            staging = sink.begin_staging(table, SCHEMA, "op-" + uuid.uuid4().hex[:8])
            sink.stage(staging, SCHEMA, chunks())
            sink.finalize_staged_load(permit_for(table), staging, table)
        else:
            sink.load(permit_for(table), table, SCHEMA, chunks())
        return [c for c in live_contexts() if id(c) not in before]
    finally:
        gc.enable()


def assert_target_equals_source(sink: ClickHouseSink, table: str) -> None:
    count, id_sum, amount_sum = (
        sink._client().query(f"SELECT count(), sum(id), sum(amount) FROM {table}").result_rows[0]
    )
    assert (count, id_sum, Decimal(amount_sum)) == expected()


@pytest.mark.parametrize("staged", [False, True], ids=["direct", "staged"])
def test_chdb_load_keeps_no_sent_block_alive(chdb_dir: Path, staged: bool) -> None:
    endpoint = EndpointDescriptor(
        name="warehouse",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.CHDB,
        path=str(chdb_dir),
    )
    with ClickHouseSink(endpoint) as sink:
        table = "bench.orders"
        sink.prepare_target(table, SCHEMA, ("order_date", "id"))
        leftover = load_with_the_collector_off(sink, table, staged)
        assert len(leftover) <= 1, f"{len(leftover)} insert contexts outlived {BLOCKS} inserts"
        assert not any(holds_rows(c) for c in leftover), "a sent block is still referenced"
        assert_target_equals_source(sink, table)


@pytest.mark.parametrize("staged", [False, True], ids=["direct", "staged"])
def test_http_load_keeps_no_sent_block_alive(clickhouse_http: EndpointDescriptor, staged: bool) -> None:
    database = f"dpone_mem_{uuid.uuid4().hex[:10]}"
    table = f"{database}.orders"
    with ClickHouseSink(clickhouse_http) as sink:
        try:
            sink.prepare_target(table, SCHEMA, ("order_date", "id"))
            leftover = load_with_the_collector_off(sink, table, staged)
            assert len(leftover) <= 1, f"{len(leftover)} insert contexts outlived {BLOCKS} inserts"
            assert not any(holds_rows(c) for c in leftover), "a sent block is still referenced"
            assert_target_equals_source(sink, table)
        finally:
            sink._client().command(f"DROP DATABASE IF EXISTS {database}")
