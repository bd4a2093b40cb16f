"""The SQLite Arrow read that is its own value audit, for the paths that read everything before arming.

``file_artifact``'s export and ``staged``'s staging insert read every partition before arming, so the
value audit (``sqlite_arrow_audit``) and the read read and convert the same columns twice: on the 1M-row
demo, ~0.7 s of audit, then ~0.7 s of reading. Run in the audit's place, this read is both. This read checks, chunk by chunk, exactly what
the audit's Arrow proof checks, on the values it converts anyway:

* the statement is the Arrow read's (``sqlite_arrow.ArrowPlan``: literal row, marker, the same predicate
  and order) with the audit's blob count after the columns;
* ``Int64``: the pinned type, checked on every batch (``data_batches``);
* ``Decimal(p <= 15, s)``: the Arrow converter accepts the chunk (exact at the scale, within range);
* ``Date`` / ``DateTime``: valid UTF-8, the Arrow converter accepts the chunk, and every value is within
  the target's range (``ValueLimits``);
* text: valid UTF-8, and no blob in any text, date or datetime column.

It is offered only where the audit's Arrow proof applies to every audited column (``audit_read``) and the
Arrow read to every column. Anything it cannot prove, a driver error included, raises
``ValuesUnproven``: the audit decides exactly as when its own Arrow proof fails (the SQL audit names what
is wrong, or proves the values for the row read), and the reads run again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.adapters.sources import arrow_values
from airflow_provider_dpone.adapters.sources.sqlite_arrow import (
    ArrowInput,
    ArrowPlan,
    ColumnSlot,
    batch_groups,
    column_chunk,
    data_batches,
)
from airflow_provider_dpone.adapters.sources.sqlite_arrow_audit import (
    BLOBS,
    CALENDAR_RANGES,
    AuditRead,
    blob_count,
)
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec
from airflow_provider_dpone.ports.source import ValueLimits, ValuesUnproven


def _proving(column: ColumnSpec, slot: ColumnSlot, limits: ValueLimits) -> ArrowInput:
    """The slot's conversion, refusing (``ValuesUnproven``) what the audit's Arrow proof would not prove."""
    base = column.clickhouse_type
    columnar = arrow_values.from_arrow_for(column)
    if columnar is None:  # Int64 (its type is the proof) and text (UTF-8 checked by the slot, blobs counted)
        return slot.convert
    calendar = CALENDAR_RANGES.get(base)
    low = high = None
    if calendar is not None:
        kind, low_key, high_key = calendar
        low = pa.scalar(limits[low_key], kind)  # type: ignore[literal-required]
        high = pa.scalar(limits[high_key], kind)  # type: ignore[literal-required]

    def convert(array: pa.Array) -> Sequence[object]:
        if array.null_count == len(array):
            return slot.convert(array)  # only NULLs: proven, and converted as the Arrow read does
        if calendar is not None:
            array.validate(full=True)  # invalid UTF-8 raises: unproven
        fast = columnar(array)
        if fast is None:
            raise ValuesUnproven(column.name)
        if low is not None and high is not None and not arrow_values.within(fast.array, low, high):
            raise ValuesUnproven(column.name)
        return fast

    return convert


@dataclass(frozen=True)
class ProvingRead:
    """The Arrow read of ``plan`` that proves every chunk as the audit would (see the module)."""

    plan: ArrowPlan
    converts: tuple[ArrowInput, ...]
    #: positions of the columns whose blobs are counted (text, dates, datetimes)
    text_columns: tuple[int, ...]

    @property
    def arrow_types(self) -> list[pa.DataType]:
        return [*self.plan.arrow_types, pa.int64()]

    def statement(
        self, source: str, bounds: PartitionBounds, order_by: Sequence[str]
    ) -> tuple[str, tuple[object, ...]]:
        """The Arrow read's statement with the blob count after the columns."""
        names = self.plan.schema.names
        blobs = blob_count([names[i] for i in self.text_columns])
        return self.plan.statement(source, bounds, order_by, [(BLOBS, blobs, pa.int64())])

    def chunks(
        self, batches: Iterator[pa.RecordBatch], partition_id: str, chunk_rows: int
    ) -> Iterator[ColumnChunk]:
        """The read's chunks, each proven (``ValuesUnproven`` at the first that is not)."""
        names = self.plan.schema.names
        for group in batch_groups(self._without_blobs(data_batches(batches, self.arrow_types)), chunk_rows):
            yield column_chunk(group, names, self.converts, partition_id)

    def _without_blobs(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        width = len(self.plan.slots)
        for batch in batches:
            if pc.sum(batch.column(width)).as_py():
                raise ValuesUnproven("a blob in a text column")
            yield batch.select(list(range(width)))


def proving_read(plan: ArrowPlan | None, audit: AuditRead | None, limits: ValueLimits) -> ProvingRead | None:
    """The proving read of ``plan`` (the Arrow read with clean storage facts), or ``None`` when the audit's
    Arrow proof does not cover every audited column (``audit`` is ``None``) or the Arrow read every column."""
    if plan is None or audit is None:
        return None
    audited = {a.column.name: a for a in audit.audited}
    converts: list[Callable[[pa.Array], Sequence[object]]] = []
    texts: list[int] = []
    for index, (column, slot) in enumerate(zip(plan.schema.columns, plan.slots, strict=True)):
        one = audited.get(column.name)
        if one is None:  # exempt (a rowid alias): integers by SQLite's own rule
            converts.append(slot.convert)
            continue
        if one.text:
            texts.append(index)
        converts.append(_proving(column, slot, limits))
    return ProvingRead(plan, tuple(converts), tuple(texts))
