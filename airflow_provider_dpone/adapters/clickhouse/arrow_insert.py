"""Inserting a block as Arrow where the engine reads it (chDB), instead of clickhouse-connect's Native.

clickhouse-connect's Native encoder walks Python values one by one (about 1.2-1.4 s per 1M demo rows);
chDB reads an Arrow IPC body itself, in C++. Columns the source already holds as Arrow
(:class:`ArrowColumn`: dates, datetimes, decimals) go in as they are, the others are built with one
``pa.array`` call per column. Only types whose Arrow reading is value for value the Native one are
taken (``tests/integration/test_clickhouse_arrow_insert.py`` inserts both ways and compares); for any
other type, or a column pyarrow cannot build, :func:`arrow_table` returns ``None`` and the block goes the
Native way. ClickHouse 18.16 has no Arrow input format: server inserts stay Native.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from airflow_provider_dpone.adapters.clickhouse.table_schema import holds_null, strip_nullable
from airflow_provider_dpone.adapters.clickhouse.type_names import decimal_parts, stored_type

_SIMPLE: dict[str, pa.DataType] = {
    "Int8": pa.int8(),
    "Int16": pa.int16(),
    "Int32": pa.int32(),
    "Int64": pa.int64(),
    "UInt8": pa.uint8(),
    "UInt16": pa.uint16(),
    "UInt32": pa.uint32(),
    "UInt64": pa.uint64(),
    "Float32": pa.float32(),
    "Float64": pa.float64(),
    "String": pa.binary(),  # text and bytes alike: ClickHouse String is bytes
    "Date": pa.date32(),
    "DateTime": pa.timestamp("s"),  # naive: the epoch second of a UTC wall time, as the Native path
}


def arrow_type(type_name: str) -> pa.DataType | None:
    """The Arrow type a target column of ``type_name`` takes exactly, or ``None`` (Native only). A
    ``LowCardinality(String)`` column takes the strings as a ``String`` column does (the engine builds its
    dictionary)."""
    base = strip_nullable(stored_type(type_name))
    simple = _SIMPLE.get(base)
    if simple is not None:
        return simple
    decimal = decimal_parts(base)
    if decimal:
        precision, scale = decimal
        if 1 <= precision <= 38 and scale <= precision:
            return pa.decimal128(precision, scale)
    return None


def arrow_table(
    names: Sequence[str], type_names: Sequence[str], columns: Sequence[Sequence[object]]
) -> pa.Table | None:
    """The block as an Arrow table, or ``None`` when a column has no exact Arrow form."""
    arrays = []
    for type_name, values in zip(type_names, columns, strict=True):
        kind = arrow_type(type_name)
        if kind is None:
            return None
        try:
            array = pa.array(values, type=kind, from_pandas=False)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None  # e.g. a bool in an integer column: the Native path and its refusals decide
        if array.null_count and not holds_null(type_name):
            # an Arrow insert turns a NULL into the column's default (''/0) without a word; clickhouse-
            # connect's Native encoder refuses it: let it decide (a run proves such columns NULL-free
            # before arming, so only a row changed since then gets here)
            return None
        arrays.append(array)
    return pa.Table.from_arrays(arrays, names=list(names))
