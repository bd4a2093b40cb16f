"""SQLite partitions read straight into Arrow (ADBC's SQLite driver), for columns the audit proved uniform.

``fetchmany`` builds a Python tuple per row and an object per value, which ``ChunkBuilder`` then takes
apart again; on the 1M-row demo that was ~2.6 s of a ~4.5 s run. The ADBC driver reads the same statement
into Arrow record batches in C (~0.6 s). It is used only where it provably returns what the row read
returns, and otherwise the row read runs, as before:

* **Types.** The driver types each column from the first batch it reads, and fails the statement when a
  later value has another storage class (a column whose first rows are NULL is typed ``int64``, a later
  text is then an error in the middle of the read: after arming, on a direct load). So every statement
  starts with one row of typed literals (``0``, ``0.0``, ``''``) that pins each column's type; the read's
  own rows follow in their own order (a ``LIMIT -1`` subquery keeps its ``ORDER BY``) and the literal row
  is dropped. A marker column proves the literal row came first and only once, or the read fails closed.
* **Storage classes.** A column qualifies only when the pre-arm value audit of the same partitions proved
  its values of the one class its literal pins: integers (checked, or a rowid alias), numbers for floats
  and ``Decimal(p <= 15, s)`` (integers are widened to doubles exactly: the audit bounds them below 2**53),
  ISO text for dates and datetimes (checked), and text for text columns (no blob, counted by the audit's
  storage facts). Anything else (flags, coerced text columns, wider decimals, text in a decimal column)
  keeps the whole read on the row path.
* **Values.** Dates, datetimes and decimals go through the same Arrow converters as the row path
  (``arrow_values``), and through the per-value converters on the Arrow array's Python values whenever
  those cannot prove equality. Text is checked as UTF-8, as ``sqlite3`` does when it decodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.adapters.sources import arrow_values
from airflow_provider_dpone.adapters.sources import sqlite_sql as lite
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.adapters.sources.column_values import converter_for
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

#: Rows per record batch the driver builds (its default is 1,024: many small batches to join).
BATCH_ROWS = 10_000
#: The marker column the literal row carries 0 in and every read row 1.
MARKER = "dpone_arrow_marker"

ArrowInput = Callable[[pa.Array], Sequence[object]]

#: The literal that pins each Arrow type the driver is let to produce (its first row types the column).
LITERALS: dict[pa.DataType, str] = {pa.int64(): "0", pa.float64(): "0.0", pa.string(): "''"}


def pinned(columns: Sequence[tuple[str, pa.DataType]], rows: str) -> str:
    """A statement whose first row is the literal row of ``columns`` (alias, type) behind a marker 0, then
    ``rows`` (a ``SELECT`` list of the same columns after ``1`` and its ``FROM``, with no ``SELECT``),
    kept in its own order by the ``LIMIT -1`` subquery; :func:`data_batches` checks and drops the row."""
    literals = ", ".join(f"{LITERALS[kind]} AS {lite.quote_ident(name)}" for name, kind in columns)
    return f"SELECT 0 AS {MARKER}, {literals}\nUNION ALL\nSELECT * FROM (SELECT 1, {rows}\nLIMIT -1)"


class ArrowReadBroken(Exception):
    """The driver returned something the read cannot prove is the partition's rows (never expected)."""


@dataclass(frozen=True)
class ColumnSlot:
    """How one column travels the Arrow read: the type its literal pins (``LITERALS``) and its converter."""

    #: the Arrow type the literal pins (the driver's batches are checked against it)
    arrow_type: pa.DataType
    convert: ArrowInput
    #: whether the audit's storage fact of this column must be zero (else its checks prove the class)
    needs_fact: bool


def _texts(array: pa.Array) -> pa.Array:
    array.validate(full=True)  # invalid UTF-8 raises, as sqlite3's decoding of the row read does
    return array


def _slot(column: ColumnSpec, coerced: bool) -> ColumnSlot | None:
    """The column's slot, or ``None`` when only the row read is proven for it."""
    base = column.clickhouse_type
    if base == "Int64":
        return ColumnSlot(pa.int64(), ArrowColumn, needs_fact=False)
    if base == "Float64":
        return ColumnSlot(pa.float64(), ArrowColumn, needs_fact=False)
    if base == "String" and not coerced:
        return ColumnSlot(pa.string(), lambda array: ArrowColumn(_texts(array)), needs_fact=True)
    if base in ("Date", "DateTime") or base.startswith("Decimal("):
        columnar = arrow_values.from_arrow_for(column)
        if columnar is None:
            return None
        careful = converter_for(column, coerce=coerced)
        decimal = base.startswith("Decimal(")

        def convert(array: pa.Array) -> Sequence[object]:
            if not decimal:
                array = _texts(array)
            fast = columnar(array)
            if fast is not None:
                return fast
            values = array.to_pylist()
            return careful(values) if careful is not None else values

        if decimal:
            return ColumnSlot(pa.float64(), convert, needs_fact=True)
        return ColumnSlot(pa.string(), convert, needs_fact=False)
    return None


@dataclass(frozen=True)
class ArrowPlan:
    """The Arrow read of one schema: a slot per column, in order."""

    schema: TableSchema
    slots: tuple[ColumnSlot, ...]

    @property
    def arrow_types(self) -> list[pa.DataType]:
        """The batch types the literal row pins: the marker's, then each column's."""
        return [pa.int64(), *(slot.arrow_type for slot in self.slots)]

    def statement(
        self,
        source: str,
        bounds: PartitionBounds,
        order_by: Sequence[str],
        extra: Sequence[tuple[str, str, pa.DataType]] = (),
    ) -> tuple[str, tuple[object, ...]]:
        """The literal row, then exactly the row read's ``SELECT`` (same predicate, same order); ``extra``
        columns (alias, SQL expression, pinned type) follow the schema's."""
        expressions = [expression for _, expression, _ in extra]
        text, params = lite.select_rows(source, self.schema.names, bounds, order_by, expressions)
        columns = [(name, slot.arrow_type) for name, slot in zip(self.schema.names, self.slots, strict=True)]
        columns += [(alias, kind) for alias, _, kind in extra]
        return pinned(columns, text.removeprefix("SELECT ")), params

    def chunks(
        self, batches: Iterator[pa.RecordBatch], partition_id: str, chunk_rows: int
    ) -> Iterator[ColumnChunk]:
        """Chunks of ``chunk_rows`` rows from the driver's batches (:func:`data_batches`), each chunk's
        batches concatenated per column, then converted once per column (as ``ChunkBuilder.join``)."""
        converts = [slot.convert for slot in self.slots]
        for group in batch_groups(data_batches(batches, self.arrow_types), chunk_rows):
            yield column_chunk(group, self.schema.names, converts, partition_id)


def arrow_plan(
    schema: TableSchema,
    coerced: Callable[[ColumnSpec], bool],
    facts: dict[str, int] | None,
) -> ArrowPlan | None:
    """The Arrow read of ``schema`` when every column has a slot and the audit's storage facts (``facts``:
    column -> rows of another class; ``None`` when no audit counted them) leave each column one class."""
    if facts is None:
        return None
    slots = []
    for column in schema.columns:
        slot = _slot(column, coerced(column))
        if slot is None or (slot.needs_fact and facts.get(column.name, 1) != 0):
            return None
        slots.append(slot)
    return ArrowPlan(schema, tuple(slots))


def readable(schema: TableSchema, coerced: Callable[[ColumnSpec], bool]) -> bool:
    """Whether every column of ``schema`` has a slot: only then can storage facts make a read proven."""
    return all(_slot(column, coerced(column)) is not None for column in schema.columns)


def data_batches(
    batches: Iterator[pa.RecordBatch], arrow_types: list[pa.DataType]
) -> Iterator[pa.RecordBatch]:
    """The read's own rows, batch by batch, without the marker column: the batches must have
    ``arrow_types`` (the marker's first), the first row of the first batch must be the literal row (marker
    0), and every other row a read row (marker 1); else :class:`ArrowReadBroken`."""
    first = True
    for batch in batches:
        if [field.type for field in batch.schema] != arrow_types:
            raise ArrowReadBroken("column types")
        marker = batch.column(0)
        if first:
            if batch.num_rows == 0 or marker[0].as_py() != 0:
                raise ArrowReadBroken("the literal row did not come first")
            batch, marker, first = batch.slice(1), marker.slice(1), False
        if len(marker) and not (marker.null_count == 0 and pc.all(pc.equal(marker, 1)).as_py()):
            raise ArrowReadBroken("a literal row among the rows")
        if batch.num_rows:
            yield batch.select(list(range(1, batch.num_columns)))  # by position: names may repeat
    if first:
        raise ArrowReadBroken("no literal row")


def batch_groups(batches: Iterator[pa.RecordBatch], chunk_rows: int) -> Iterator[list[pa.RecordBatch]]:
    """``batches`` cut and regrouped into lists of ``chunk_rows`` rows (the last may hold fewer)."""
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be at least 1")
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        while batch.num_rows:
            take = min(batch.num_rows, chunk_rows - held)
            pending.append(batch.slice(0, take))
            held += take
            batch = batch.slice(take)
            if held == chunk_rows:
                yield pending
                pending, held = [], 0
    if pending:
        yield pending


def column_chunk(
    batches: list[pa.RecordBatch], names: Sequence[str], converts: Sequence[ArrowInput], partition_id: str
) -> ColumnChunk:
    """One chunk of ``batches``: each column concatenated, then converted once."""
    columns: list[Sequence[object]] = []
    for index, convert in enumerate(converts):
        arrays = [batch.column(index) for batch in batches]
        array = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
        columns.append(convert(array))
    return ColumnChunk(
        partition_id=partition_id,
        names=tuple(names),
        columns=tuple(columns),
        row_count=sum(batch.num_rows for batch in batches),
    )
