"""Rows from a DB-API cursor -> bounded, converted :class:`ColumnChunk` objects.

Transposition uses ``map(itemgetter(i), rows)`` per column: measured here about five times faster than
``zip(*rows)`` on 50k-row batches. Columns whose values need no conversion are not touched again.

``Date``, ``DateTime`` and ``Decimal`` columns first try the columnar converters of ``arrow_values``
(Arrow compute; the column then travels as an :class:`ArrowColumn`); when they cannot prove the result
equal to the per-value converter's for that column of that chunk, the per-value converter runs, with its
own acceptance and refusals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter

from airflow_provider_dpone.adapters.sources.arrow_values import ArrowConverter, arrow_converter_for
from airflow_provider_dpone.adapters.sources.column_values import Converter, converter_for
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.schema import TableSchema


class ChunkBuilder:
    """Turns one fetched batch of row tuples into a ColumnChunk of the schema's columns, in order.

    ``columnar=False`` keeps every column on the per-value converters (the reference path)."""

    def __init__(
        self,
        partition_id: str,
        schema: TableSchema,
        coerce: Callable[[str], bool],
        *,
        columnar: bool = True,
    ) -> None:
        self._partition_id = partition_id
        self._names = schema.names
        self._getters = [itemgetter(i) for i in range(len(schema.columns))]
        self._converters: list[Converter | None] = [
            converter_for(column, coerce=coerce(column.name)) for column in schema.columns
        ]
        self._columnar: list[ArrowConverter | None] = [
            arrow_converter_for(column) if columnar else None for column in schema.columns
        ]

    def build(self, rows: Sequence[Sequence[object]]) -> ColumnChunk:
        columns: list[Sequence[object]] = []
        for getter, convert, columnar in zip(self._getters, self._converters, self._columnar, strict=True):
            values = list(map(getter, rows))
            fast = columnar(values) if columnar is not None else None
            if fast is not None:
                columns.append(fast)
            else:
                columns.append(convert(values) if convert is not None else values)
        return ColumnChunk(
            partition_id=self._partition_id, names=self._names, columns=tuple(columns), row_count=len(rows)
        )


def stream_chunks(
    fetch: Callable[[int], Sequence[Sequence[object]]], builder: ChunkBuilder, chunk_rows: int
) -> Iterator[ColumnChunk]:
    """Fetch at most ``chunk_rows`` rows at a time until the cursor is exhausted."""
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be at least 1")
    while True:
        rows = fetch(chunk_rows)
        if not rows:
            return
        yield builder.build(rows)
