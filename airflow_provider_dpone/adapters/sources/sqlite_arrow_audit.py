"""The value audit's fast proof: the audited columns read into Arrow and proven clean in Arrow compute.

The SQL audit (``value_audit``) classifies every value of every audited column in SQLite's interpreter,
about 1 s per 1M demo rows on two cores, longer than reading the same columns into Arrow with the ADBC
driver and checking them there. This module only ever *proves a run clean*; it never refuses anything.
When it cannot prove a column (a value of another storage class, a shape, calendar day or range the Arrow
converters do not accept, a blob, any driver error), the caller runs the SQL audit, which finds and
names what is wrong exactly as before. So a refusal, its reason, rows and hints are the SQL audit's.

A column is proven by the same facts the Arrow read and the converters rely on:

* ``Int64``: the driver typed it ``int64`` behind a literal ``0`` without an error, which it does only
  when every value has integer storage (a REAL or text value fails the read or changes the type);
* ``Decimal(p <= 15, s)``: typed ``double`` behind ``0.0`` (text fails or changes the type), and
  ``arrow_values.decimals_of_doubles`` accepts every batch (exact at the scale, within range; an integer
  past 2**53 is past the range too);
* ``Date`` / ``DateTime``: typed ``string`` behind ``''``, no blob among them (counted in the statement),
  every batch accepted by ``arrow_values``' text converters (ISO shape, real calendar days, whole
  seconds, no offset) and within the target's own range (``ValueLimits``);
* text columns of TEXT affinity: valid UTF-8 and no blob. Any other audited kind (flags, floats, wider
  decimals, coerced text) leaves the whole audit to SQL.

A clean proof also gives the Arrow read its storage facts: every count is zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.adapters.sources import arrow_values
from airflow_provider_dpone.adapters.sources import sqlite_sql as lite
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.adapters.sources.sqlite_arrow import data_batches, pinned
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.ports.source import ValueLimits

#: The name of the statement's blob count column (after the audited columns).
BLOBS = "dpone_arrow_blobs"

Proof = Callable[[pa.Array, ValueLimits], bool]


def _integers(array: pa.Array, limits: ValueLimits) -> bool:
    return True  # the type is the proof (checked on every batch by ``data_batches``)


def _decimal(precision: int, scale: int) -> Proof | None:
    convert = arrow_values.decimals_of_doubles(precision, scale)
    if convert is None:
        return None

    def proof(array: pa.Array, limits: ValueLimits) -> bool:
        return array.null_count == len(array) or convert(array) is not None

    return proof


def _calendar(
    convert: Callable[[pa.Array], ArrowColumn | None], kind: pa.DataType, low: str, high: str
) -> Proof:
    """Dates or datetimes: every text accepted by ``convert`` (to ``kind``) and within the target's
    ``low``..``high``."""

    def proof(array: pa.Array, limits: ValueLimits) -> bool:
        if array.null_count == len(array):
            return True
        array.validate(full=True)  # invalid UTF-8 raises: the SQL audit decides
        parsed = convert(array)
        if parsed is None:
            return False
        lowest = pa.scalar(limits[low], kind)  # type: ignore[literal-required]
        return arrow_values.within(parsed.array, lowest, pa.scalar(limits[high], kind))  # type: ignore[literal-required]

    return proof


#: Per calendar type: the Arrow type its values convert to, and the ``ValueLimits`` keys of its range.
CALENDAR_RANGES: dict[str, tuple[pa.DataType, str, str]] = {
    "Date": (pa.date32(), "date_min", "date_max"),
    "DateTime": (pa.timestamp("s"), "datetime_min", "datetime_max"),
}
_dates = _calendar(arrow_values.dates_of_texts, *CALENDAR_RANGES["Date"])
_datetimes = _calendar(arrow_values.datetimes_of_texts, *CALENDAR_RANGES["DateTime"])


def _texts(array: pa.Array, limits: ValueLimits) -> bool:
    array.validate(full=True)  # invalid UTF-8 raises: the SQL audit names it (the reads would refuse it)
    return True  # blobs are counted by the statement


def blob_count(columns: Sequence[str]) -> str:
    """The SQL expression counting, per row, the blobs among ``columns`` (``0`` for none)."""
    return " + ".join(f"(typeof({lite.quote_ident(name)}) = 'blob')" for name in columns) or "0"


@dataclass(frozen=True)
class _Audited:
    column: ColumnSpec
    #: the Arrow type its literal pins (``sqlite_arrow.LITERALS``)
    arrow_type: pa.DataType
    proof: Proof
    #: a text-typed column: its blobs are counted
    text: bool


def _audited(column: ColumnSpec, coerced: bool) -> _Audited | None:
    base = column.clickhouse_type
    if base == "Int64":
        return _Audited(column, pa.int64(), _integers, text=False)
    if base.startswith("Decimal("):
        precision, scale = (int(part) for part in base[len("Decimal(") : -1].split(","))
        proof = _decimal(precision, scale)
        return None if proof is None else _Audited(column, pa.float64(), proof, text=False)
    if base == "Date":
        return _Audited(column, pa.string(), _dates, text=True)
    if base == "DateTime":
        return _Audited(column, pa.string(), _datetimes, text=True)
    if base == "String" and not coerced:
        return _Audited(column, pa.string(), _texts, text=True)
    return None


@dataclass(frozen=True)
class AuditRead:
    """The statement that reads a run's audited columns, and each column's proof."""

    audited: tuple[_Audited, ...]

    @property
    def arrow_types(self) -> list[pa.DataType]:
        return [pa.int64(), *(a.arrow_type for a in self.audited), pa.int64()]

    def statement(self, source: str, run: PartitionBounds) -> tuple[str, tuple[object, ...]]:
        """The literal row, then every row of ``run``'s predicate (no order: an audit counts)."""
        condition = lite.predicate(run)
        where, params = (f"\nWHERE {condition[0]}", condition[1]) if condition is not None else ("", ())
        names = [lite.quote_ident(a.column.name) for a in self.audited]
        blobs = blob_count([a.column.name for a in self.audited if a.text])
        columns = [*((a.column.name, a.arrow_type) for a in self.audited), (BLOBS, pa.int64())]
        return pinned(columns, f"{', '.join(names)}, {blobs}\nFROM {source}{where}"), params

    def proven(self, batches: Iterator[pa.RecordBatch], limits: ValueLimits) -> bool:
        """Whether every batch proves every column clean (stops at the first that does not)."""
        for batch in data_batches(batches, self.arrow_types):
            blobs = pc.sum(batch.column(len(self.audited))).as_py()
            if blobs:
                return False
            for index, audited in enumerate(self.audited):
                if not audited.proof(batch.column(index), limits):
                    return False
        return True


def audit_read(
    schema: TableSchema, exempt: frozenset[str], coerced: Callable[[ColumnSpec], bool]
) -> AuditRead | None:
    """The Arrow proof of ``schema``'s audit, or ``None`` when a column of it needs the SQL audit."""
    audited: list[_Audited] = []
    for column in schema.columns:
        if column.name in exempt:
            continue
        one = _audited(column, coerced(column))
        if one is None:
            return None
        audited.append(one)
    return AuditRead(tuple(audited)) if audited else None
