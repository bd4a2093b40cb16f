"""The SQLite source fetches at most ``FETCH_ROWS`` rows at a time and still gives the chunks it gave
with one fetch per chunk: same sizes, order, values and their forms (a real SQLite file, demo rows)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources import chunking
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType

ROWS = 9_000
DAYS = 2  # 4,500 rows a day


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fetch-bound") / "source.sqlite"
    create_demo_source(path, ROWS, days=DAYS)
    return path


def _read(path: Path, chunk_rows: int) -> list[list[ColumnChunk]]:
    spec = SourceSpec(
        type=SourceType.SQLITE,
        connection="demo_source",
        table="orders",
        partitioning=Partitioning(kind=PartitionKind.DAY, column="order_date"),
    )
    source = SqliteSource(path, spec)
    try:
        return [
            list(source.read(f"p{i}", bounds, chunk_rows))
            for i, bounds in enumerate(source.plan_partitions())
        ]
    finally:
        source.close()


def _forms(chunks: Sequence[ColumnChunk]) -> list[list[list[tuple[type, str]]]]:
    return [[[(type(v), str(v)) for v in column] for column in chunk.columns] for chunk in chunks]


def test_sqlite_reads_in_bounded_fetches_give_the_chunks_of_one_fetch_per_chunk(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunk_rows = 2_000
    monkeypatch.setattr(chunking, "FETCH_ROWS", 10**9)
    whole = _read(demo, chunk_rows)

    sizes: list[int] = []
    fetch_part = chunking._fetch_part

    def spy(
        fetch: Callable[[int], Sequence[Sequence[object]]], builder: chunking.ChunkBuilder, size: int
    ) -> object:
        sizes.append(size)
        return fetch_part(fetch, builder, size)

    monkeypatch.setattr(chunking, "FETCH_ROWS", 700)
    monkeypatch.setattr(chunking, "_fetch_part", spy)
    bounded = _read(demo, chunk_rows)

    assert len(whole) == DAYS and sum(c.row_count for p in whole for c in p) == ROWS
    assert max(sizes) == 700
    for got, want in zip(bounded, whole, strict=True):
        assert [c.row_count for c in got] == [c.row_count for c in want] == [2_000, 2_000, 500]
        assert _forms(got) == _forms(want)
