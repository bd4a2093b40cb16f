"""The columnar insert paths write exactly what the per-value Native path writes.

Rows from SQLite-shaped text and numbers are converted twice: by the Arrow converters (columns travel as
``ArrowColumn``) and by the per-value converters (Python lists). Both are staged through the real sink —
into chDB (Arrow body vs Native) and into the ClickHouse 18.16 server (Native from Arrow buffers vs
Native from Python values) — in several chunks, so small ones are merged into one block, and the tables
are read back and compared row for row, and with the values the source meant.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse import sink as sink_module
from airflow_provider_dpone.adapters.clickhouse.arrow_insert import arrow_table
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.adapters.sources.chunking import ChunkBuilder
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="day", clickhouse_type="Date", nullable=False),
        ColumnSpec(name="maybe_day", clickhouse_type="Date"),
        ColumnSpec(name="moment", clickhouse_type="DateTime", nullable=False),
        ColumnSpec(name="maybe_moment", clickhouse_type="DateTime"),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)", nullable=False),
        ColumnSpec(name="maybe_amount", clickhouse_type="Decimal(9,3)"),
        ColumnSpec(name="wide", clickhouse_type="Decimal(38,10)"),
        ColumnSpec(name="ratio", clickhouse_type="Float64"),
        ColumnSpec(name="name", clickhouse_type="String"),
        ColumnSpec(name="flag", clickhouse_type="UInt8", nullable=False),
    )
)


def _row(i: int) -> tuple[object, ...]:
    null = i % 7 == 0
    return (
        i,
        f"{1970 + i % 130:04d}-{1 + i % 12:02d}-{1 + i % 28:02d}",
        None if null else "2106-02-07" if i % 5 == 0 else "1970-01-01",
        f"2026-03-29 {i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}"
        if i % 2
        else f"2106-02-06T23:59:{i % 60:02d}",  # the last day 18.16 holds
        None if null else f"1970-01-01 00:00:{i % 60:02d}",
        i if i % 3 == 0 else (i * 37 % 100_000) / 100 * (-1 if i % 4 == 0 else 1),
        None if null else (i % 1000) / 1000,
        None if null else str(Decimal(i).scaleb(-10) + 12345678901234567),
        i / 3,
        f"name {i} é" if i % 3 else "",
        i % 2,
    )


ROWS = [_row(i) for i in range(1, 2_500)]


def _chunks(columnar: bool) -> list[ColumnChunk]:
    builder = ChunkBuilder("p", SCHEMA, lambda name: name in ("name", "flag", "ratio"), columnar=columnar)
    return [builder.build(ROWS[start : start + 700]) for start in range(0, len(ROWS), 700)]


def _stage(sink: ClickHouseSink, chunks: list[ColumnChunk], operation: str) -> str:
    staging = sink.begin_staging("t1.orders", SCHEMA, operation)
    assert sink.stage(staging, SCHEMA, chunks) == len(ROWS)
    return staging


def _read(endpoint: EndpointDescriptor, table: str) -> list[tuple[Any, ...]]:
    client = open_client(endpoint)
    try:
        return [tuple(r) for r in client.query(f"SELECT * FROM {table} ORDER BY id").result_rows]
    finally:
        client.close()


def _expected() -> list[tuple[Any, ...]]:
    out = []
    for row in ROWS:
        values = list(row)
        values[1] = date.fromisoformat(values[1])  # type: ignore[arg-type]
        values[2] = None if values[2] is None else date.fromisoformat(values[2])  # type: ignore[arg-type]
        values[3] = datetime.fromisoformat(values[3])  # type: ignore[arg-type]
        values[4] = None if values[4] is None else datetime.fromisoformat(values[4])  # type: ignore[arg-type]
        values[5] = Decimal(repr(values[5]) if isinstance(values[5], float) else values[5])
        values[6] = None if values[6] is None else Decimal(repr(values[6]))
        values[7] = None if values[7] is None else Decimal(values[7])  # type: ignore[arg-type]
        out.append(tuple(values))
    return out


def test_the_arrow_converters_take_every_dated_and_decimal_column() -> None:
    chunk = _chunks(columnar=True)[0]
    arrow = [
        name
        for name, column in zip(chunk.names, chunk.columns, strict=True)
        if isinstance(column, ArrowColumn)
    ]
    assert arrow == ["day", "maybe_day", "moment", "maybe_moment", "amount", "maybe_amount"]


@pytest.fixture
def chdb_sink(chdb_dir: Path) -> Iterator[tuple[ClickHouseSink, EndpointDescriptor]]:
    endpoint = EndpointDescriptor(
        name="warehouse", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(chdb_dir)
    )
    target = ClickHouseSink(endpoint)
    try:
        yield target, endpoint
    finally:
        target.close()


def test_chdb_arrow_insert_writes_what_native_writes(
    chdb_sink: tuple[ClickHouseSink, EndpointDescriptor], monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, endpoint = chdb_sink
    sent: list[int] = []
    real = sink_module.arrow_table

    def spy(*args: Any) -> Any:
        table = real(*args)
        sent.append(0 if table is None else table.num_rows)
        return table

    monkeypatch.setattr(sink_module, "arrow_table", spy)
    arrow_staged = _stage(sink, _chunks(columnar=True), "arrow")
    python_staged = _stage(sink, _chunks(columnar=False), "python-arrow")  # Python lists, Arrow body
    assert sum(sent) == 2 * len(ROWS) and 0 not in sent  # every block went as Arrow
    monkeypatch.setattr(ClickHouseSink, "_arrow_inserts", lambda self: False)
    native_staged = _stage(sink, _chunks(columnar=False), "native")
    sink.close()
    native = _read(endpoint, native_staged)
    assert native == _expected()
    assert _read(endpoint, arrow_staged) == native
    assert _read(endpoint, python_staged) == native


def _insert_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each Arrow insert the sink makes from now on, in order."""
    sent: list[int] = []
    real = sink_module.arrow_table

    def spy(*args: Any) -> Any:
        table = real(*args)
        sent.append(table.num_rows)
        return table

    monkeypatch.setattr(sink_module, "arrow_table", spy)
    return sent


def _chunks_of(sizes: list[int]) -> list[Any]:
    """``ROWS`` as columnar chunks of these sizes, in order."""
    builder = ChunkBuilder("p", SCHEMA, lambda name: name in ("name", "flag", "ratio"), columnar=True)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [builder.build(ROWS[s : s + n]) for s, n in zip(starts, sizes, strict=True)]


def test_small_chunks_merge_but_no_insert_grows_past_the_block_bound(
    chdb_sink: tuple[ClickHouseSink, EndpointDescriptor], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition tail beside the next partition's full chunk goes in two inserts, not one larger than
    either (the rows an insert holds stay bounded by ``chunk_rows``); small chunks still fill a block;
    every row arrives once, in order. Bounds scaled down 100x (50,000 / 60,000 -> 500 / 600)."""
    sink, endpoint = chdb_sink
    monkeypatch.setattr(sink_module, "INSERT_BLOCK_ROWS", 500)
    monkeypatch.setattr(sink_module, "INSERT_BLOCK_MAX_ROWS", 600)
    sent = _insert_sizes(monkeypatch)
    sizes = [500, 333, 500, 333, 167, 166, 500]  # day 1 whole, day 2 (500 + tail 333), ...
    assert sum(sizes) == len(ROWS)
    chunks = _chunks_of(sizes)
    staged = _stage(sink, chunks, "bounded")
    sink.close()
    assert sent == [500, 333, 500, 333 + 167, 166, 500]
    assert _read(endpoint, staged) == _expected()


def test_a_block_of_many_small_chunks_holds_at_most_the_chunk_bound(
    chdb_sink: tuple[ClickHouseSink, EndpointDescriptor], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before: one-row partitions merged toward 50,000 rows, each chunk keeping its driver batch's
    buffers alive (~115 KB), so peak memory grew with the partition count (1.4-1.7 GB at 30 years of days).
    A block now closes at ``INSERT_BLOCK_MAX_CHUNKS`` chunks; every row still arrives once, in order."""
    sink, endpoint = chdb_sink
    monkeypatch.setattr(sink_module, "INSERT_BLOCK_MAX_CHUNKS", 4)
    sent = _insert_sizes(monkeypatch)
    sizes = [1] * 10 + [len(ROWS) - 10]
    chunks = _chunks_of(sizes)
    staged = _stage(sink, chunks, "few_chunks")
    sink.close()
    # the first chunk at once, then four at a time, the last small one with the large rest
    assert sent == [1, 4, 4, 1 + len(ROWS) - 10], sent
    assert _read(endpoint, staged) == _expected()


def test_http_native_from_arrow_writes_what_native_from_python_writes(
    clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = ClickHouseSink(clickhouse_http)
    bodies: list[int] = []
    real = sink_module.native_body

    def spy(*args: Any) -> Any:
        body = real(*args)
        bodies.append(0 if body is None else len(body))
        return body

    try:
        monkeypatch.setattr(sink_module, "native_body", spy)
        arrow_staged = _stage(sink, _chunks(columnar=True), "arrow")  # Native built from Arrow (native_body)
        assert bodies and 0 not in bodies, "every block went as a Native body built from Arrow"
        monkeypatch.setattr(sink_module, "native_body", lambda *args: None)
        native_staged = _stage(sink, _chunks(columnar=False), "native")  # clickhouse-connect's encoder
        native = _read(clickhouse_http, native_staged)
        assert native == _expected()
        assert _read(clickhouse_http, arrow_staged) == native
    finally:
        for table in ("arrow_staged", "native_staged"):
            staged = locals().get(table)
            if staged:
                sink.abort_staged_load(staged)
        sink.close()


def test_types_without_an_exact_arrow_form_stay_native() -> None:
    assert arrow_table(["u"], ["UUID"], [["6f9619ff-8b86-d011-b42d-00c04fc964ff"]]) is None
    assert arrow_table(["s"], ["LowCardinality(Int64)"], [[1]]) is None  # LowCardinality(String) has one
    assert arrow_table(["t"], ["DateTime('Europe/Berlin')"], [[datetime(2026, 1, 1)]]) is None
    assert arrow_table(["i"], ["Int64"], [[1, "x"]]) is None  # pyarrow refuses: the Native path decides


def test_http_native_from_arrow_survives_the_drivers_block_split(clickhouse_http: EndpointDescriptor) -> None:
    """clickhouse-connect slices an insert of more than ~2 MB into blocks; two 40,000-row chunks merge
    into one 80,000-row insert here, which the driver cuts (seen at 5M demo rows: decimals scaled twice)."""
    schema = TableSchema(
        columns=(
            ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
            ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)", nullable=False),
            ColumnSpec(name="day", clickhouse_type="Date", nullable=False),
            ColumnSpec(name="moment", clickhouse_type="DateTime"),
            ColumnSpec(name="note", clickhouse_type="String", nullable=False),  # ~100 bytes: 32k-row blocks
        )
    )
    rows = [
        (
            i,
            i % 1000 if i % 3 == 0 else (i % 100_000) / 100,
            "2026-01-02",
            None if i % 5 else "2026-01-02 03:04:05",
            "n" * 100,
        )
        for i in range(80_000)
    ]
    builder = ChunkBuilder("p", schema, lambda _: False)
    chunks = [builder.build(rows[:40_000]), builder.build(rows[40_000:])]
    assert isinstance(chunks[0].columns[1], ArrowColumn)
    sink = ClickHouseSink(clickhouse_http)
    staging = sink.begin_staging("t1.split", schema, "split")
    try:
        assert sink.stage(staging, schema, chunks) == 80_000
        client = open_client(clickhouse_http)
        try:
            got = client.query(
                f"SELECT count(), sum(toInt64(amount * 100)), sum(toUInt32(day)), countIf(moment IS NULL) FROM {staging}"
            ).result_rows[0]
        finally:
            client.close()
    finally:
        sink.abort_staged_load(staging)
        sink.close()
    cents = sum(round(Decimal(repr(a) if isinstance(a, float) else a) * 100) for _, a, _, _, _ in rows)
    days = (date(2026, 1, 2) - date(1970, 1, 1)).days * 80_000
    assert tuple(got) == (80_000, cents, days, 80_000 - 16_000)
