"""The source spec of the Arrow read tests' table ``t``, a rows strategy for it, and the chunk comparison."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType


def table_t_spec() -> SourceSpec:
    return SourceSpec(
        type=SourceType.SQLITE,
        connection="src",
        table="t",
        partitioning=Partitioning(kind=PartitionKind.DAY, column="day"),
        chunk_rows=5,
    )


def assert_same_chunks(arrow: list[ColumnChunk], rows: list[ColumnChunk]) -> None:
    assert [c.row_count for c in arrow] == [c.row_count for c in rows]
    for a, r in zip(arrow, rows, strict=True):
        assert a.names == r.names and a.partition_id == r.partition_id
        for name, left, right in zip(a.names, a.columns, r.columns, strict=True):
            assert list(left) == list(right), name
            assert [type(v) for v in left] == [type(v) for v in right], name
            if isinstance(left, ArrowColumn) and isinstance(right, ArrowColumn):
                assert left.array.equals(right.array), name


cents = st.integers(min_value=-(10**12) + 1, max_value=10**12 - 1)
amounts = st.one_of(
    st.none(),
    st.integers(min_value=-(10**10) + 1, max_value=10**10 - 1),  # whole amounts: INTEGER storage
    cents.map(lambda c: float(Decimal(c) / 100)),  # REALs exactly at the scale
)
rows_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
        st.one_of(st.none(), st.floats(allow_nan=False, width=64), st.integers(-(2**53), 2**53)),
        amounts,
        st.one_of(
            st.none(),
            st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2105, 12, 31)).map(
                lambda d: d.replace(microsecond=0).isoformat(sep=" ")
            ),
        ),
        st.one_of(st.none(), st.text(st.characters(codec="utf-8"), max_size=6)),
    ),
    min_size=1,
    max_size=40,
)
