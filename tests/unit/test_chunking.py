"""``stream_chunks``: bounded fetches (at most ``FETCH_ROWS`` rows each, whatever ``chunk_rows`` is) that
still give chunks of ``chunk_rows`` rows holding exactly the values, forms and order of one fetch per chunk.

The reference is the read as it was before the fetch bound: ``ChunkBuilder.build`` over each whole
``chunk_rows`` slice of the rows. A refusal comes after the same chunks, with the same code, naming a
column that does hold a bad value in that chunk: when a chunk holds several bad values, the bounded read
names the one of the first fetch that holds any (the whole chunk named the first bad column, and the first
reason its converter checks), so the column and reason named may differ, never whether it is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import chunking
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.adapters.sources.chunking import FETCH_ROWS, ChunkBuilder, stream_chunks
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", source_type="INTEGER"),
        ColumnSpec(name="day", clickhouse_type="Date", nullable=True, source_type="TEXT"),
        ColumnSpec(name="name", clickhouse_type="String", nullable=True, source_type="TEXT"),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12, 2)", nullable=True, source_type="NUMERIC"),
        ColumnSpec(name="at", clickhouse_type="DateTime", nullable=True, source_type="TEXT"),
    )
)


class FetchSpy:
    """A DB-API cursor's ``fetchmany`` over fixed rows that records every size asked for."""

    def __init__(self, rows: Sequence[tuple[object, ...]]) -> None:
        self._rows = rows
        self._at = 0
        self.sizes: list[int] = []
        self.after_end = 0

    def fetchmany(self, size: int) -> list[tuple[object, ...]]:
        if self._at >= len(self._rows):
            self.after_end += 1
        self.sizes.append(size)
        batch = list(self._rows[self._at : self._at + size])
        self._at += len(batch)
        return batch


def _builder() -> ChunkBuilder:
    return ChunkBuilder("p", SCHEMA, lambda _: True)


def _demo_rows(count: int) -> list[tuple[object, ...]]:
    return [
        (
            i,
            f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}",
            f"customer-{i % 97}",
            (i % 100_000) / 100,
            f"2026-03-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}",
        )
        for i in range(count)
    ]


def _unbounded(rows: Sequence[tuple[object, ...]], chunk_rows: int) -> tuple[list[ColumnChunk], Any]:
    """The read before the fetch bound: one ``build`` per ``chunk_rows`` rows; a refusal ends it."""
    builder = _builder()
    chunks: list[ColumnChunk] = []
    for start in range(0, len(rows), chunk_rows):
        try:
            chunks.append(builder.build(rows[start : start + chunk_rows]))
        except DponeError as exc:
            return chunks, _refusal(exc)
    return chunks, None


def _refusal(exc: DponeError) -> tuple[object, ...]:
    return exc.code, exc.details.get("column")


def _refuses(rows: Sequence[tuple[object, ...]], column: object) -> bool:
    """Whether the column's converter alone refuses these rows' values of it."""
    position = SCHEMA.names.index(str(column))
    builder = ChunkBuilder("p", TableSchema(columns=(SCHEMA.columns[position],)), lambda _: True)
    try:
        builder.build([(row[position],) for row in rows])
    except DponeError:
        return True
    return False


def _bounded(rows: Sequence[tuple[object, ...]], chunk_rows: int) -> tuple[list[ColumnChunk], Any, FetchSpy]:
    spy = FetchSpy(rows)
    chunks: list[ColumnChunk] = []
    try:
        for chunk in stream_chunks(spy.fetchmany, _builder(), chunk_rows):
            chunks.append(chunk)
    except DponeError as exc:
        return chunks, _refusal(exc), spy
    return chunks, None, spy


def _forms(column: Sequence[object]) -> list[tuple[type, str]]:
    return [(type(v), str(v)) for v in column]


def _assert_same(got: list[ColumnChunk], want: list[ColumnChunk]) -> None:
    assert [c.row_count for c in got] == [c.row_count for c in want]
    for a, b in zip(got, want, strict=True):
        assert (a.partition_id, a.names) == (b.partition_id, b.names)
        for x, y in zip(a.columns, b.columns, strict=True):
            assert len(x) == a.row_count
            assert _forms(x) == _forms(y)  # equal values in the same form (Decimal('1') is not '1.00')


def test_no_fetch_asks_more_than_the_bound_and_chunks_equal_the_unbounded_read() -> None:
    chunk_rows = 2 * FETCH_ROWS + FETCH_ROWS // 2
    rows = _demo_rows(2 * chunk_rows + 3)
    got, refused, spy = _bounded(rows, chunk_rows)
    want, _ = _unbounded(rows, chunk_rows)
    assert refused is None
    assert max(spy.sizes) == FETCH_ROWS < chunk_rows
    assert spy.after_end == 1  # asked once more at the end, never again after nothing came back
    assert [c.row_count for c in got] == [chunk_rows, chunk_rows, 3]
    _assert_same(got, want)
    # the columnar path survives the join: Arrow columns stay Arrow (concatenated, not rebuilt in Python)
    assert [type(column) for column in got[0].columns] == [list, ArrowColumn, list, ArrowColumn, ArrowColumn]


def test_a_chunk_smaller_than_the_bound_is_fetched_in_one_call() -> None:
    rows = _demo_rows(25)
    got, _, spy = _bounded(rows, 10)
    assert spy.sizes == [10, 10, 10, 5]  # the last asks only for what the chunk still lacks
    assert [c.row_count for c in got] == [10, 10, 5]
    _assert_same(got, _unbounded(rows, 10)[0])


_TEXT_DAY = st.dates(min_value=date(1969, 12, 30), max_value=date(2150, 1, 1)).map(str)
_TEXT_MOMENT = st.datetimes(min_value=datetime(1969, 12, 31), max_value=datetime(2106, 3, 1)).map(
    lambda m: m.isoformat(sep=" ", timespec="seconds")
)
_ROW = st.tuples(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.one_of(st.none(), _TEXT_DAY, st.dates(), st.sampled_from(["2026-02-30", "x", "2026-1-01"])),
    st.one_of(st.none(), st.text(max_size=5), st.binary(max_size=3)),
    st.one_of(
        st.none(),
        st.integers(min_value=-(10**11), max_value=10**11),
        st.floats(min_value=-1e10, max_value=1e10).map(lambda f: round(f, 2)),
        st.sampled_from([0.005, 1e-7, float("nan"), 12.5, 3]),
    ),
    st.one_of(
        st.none(), _TEXT_MOMENT, st.datetimes(), st.sampled_from(["2026-01-01 24:00:00", "2026-01-01"])
    ),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # runs of rows that keep the Arrow path (demo-like) mixed with rows that send a part per-value or refuse
    rows=st.lists(
        st.one_of(_ROW, st.integers(0, 10**6).map(lambda i: _demo_rows(i % 50 + 1)[-1])), max_size=60
    ),
    bound=st.integers(min_value=1, max_value=7),
    chunk_rows=st.integers(min_value=1, max_value=20),
)
def test_bounded_fetches_give_the_values_forms_and_refusals_of_one_fetch_per_chunk(
    rows: list[tuple[object, ...]], bound: int, chunk_rows: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunking, "FETCH_ROWS", bound)
        got, got_refusal, spy = _bounded(rows, chunk_rows)
    want, want_refusal = _unbounded(rows, chunk_rows)
    assert (got_refusal is None) == (want_refusal is None)
    if got_refusal is not None and want_refusal is not None:
        assert got_refusal[0] == want_refusal[0]
        start = len(want) * chunk_rows
        assert _refuses(rows[start : start + chunk_rows], got_refusal[1])
    assert all(size <= bound for size in spy.sizes)
    _assert_same(got, want)


def test_a_decimal_column_has_the_form_one_fetch_of_its_chunk_gives() -> None:
    """The per-value decimal converter writes a float-only column at the scale (``0.00``) and a column
    that also holds an integer at the float's shortest form (``0.0``): a chunk fetched in parts must still
    read as one column, not as the forms of its parts."""
    rows: list[tuple[object, ...]] = [(0, None, None, 0.0, None), (1, None, None, 0, None)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunking, "FETCH_ROWS", 1)
        got, _, spy = _bounded(rows, 2)
    want, _ = _unbounded(rows, 2)
    assert spy.sizes == [1, 1, 1]
    assert _forms(got[0].columns[3]) == _forms(want[0].columns[3])
    _assert_same(got, want)


def test_chunk_rows_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        next(stream_chunks(FetchSpy([]).fetchmany, _builder(), 0))
