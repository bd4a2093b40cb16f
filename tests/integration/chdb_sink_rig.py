"""``demo.orders`` chunks and the ``chdb_sink`` fixture, for tests that load a ClickHouse sink directly."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date", nullable=False),
        ColumnSpec(name="customer", clickhouse_type="String", nullable=True),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)", nullable=False),
        ColumnSpec(name="updated_at", clickhouse_type="DateTime", nullable=False),
    )
)


def chunk(ids: Sequence[int], day: date) -> ColumnChunk:
    n = len(ids)
    return ColumnChunk(
        partition_id="p",
        names=SCHEMA.names,
        columns=(
            list(ids),
            [day] * n,
            [None if i % 3 == 0 else f"c{i}" for i in ids],
            [Decimal(i) / 100 for i in ids],
            [datetime(day.year, day.month, day.day, 8, i % 60) for i in ids],
        ),
        row_count=n,
    )


def expected(chunks: Sequence[ColumnChunk]) -> list[tuple[object, ...]]:
    return sorted(tuple(row) for c in chunks for row in zip(*c.columns, strict=True))


def target_rows(sink: ClickHouseSink, table: str) -> list[tuple[object, ...]]:
    rows = sink._client().query(f"SELECT {', '.join(SCHEMA.names)} FROM {table} ORDER BY id").result_rows
    return sorted(tuple(r) for r in rows)


@pytest.fixture
def chdb_sink(chdb_dir: Path) -> Iterator[ClickHouseSink]:
    sink = ClickHouseSink(
        EndpointDescriptor(
            name="t", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(chdb_dir)
        )
    )
    try:
        yield sink
    finally:
        sink.close()
