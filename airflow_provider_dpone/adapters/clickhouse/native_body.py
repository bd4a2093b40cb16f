"""A block's Native body built from its Arrow columns with array operations, for servers without Arrow input.

clickhouse-connect's Native encoder walks Python values one by one (about 1.2-1.4 s per 1M demo rows),
in the thread that also feeds the server. The block is already an exact Arrow table (``arrow_insert``,
the chDB path's); Native's layout for the simple types is that table's buffers: fixed-width little-endian
values, a byte per row of null map before a ``Nullable`` column's values, and a length-prefixed run of bytes
per ``String``. This module writes exactly clickhouse-connect's bytes for those types
(``tests/integration/test_clickhouse_native_body.py`` compares them byte for byte, and inserts both ways
into the 18.16 server) and returns ``None`` for anything else, which then takes clickhouse-connect's
encoder and its refusals: another type, a NULL in a column that is not ``Nullable``, a day or moment
outside ``Date``'s or ``DateTime``'s range.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.adapters.clickhouse.table_schema import strip_nullable
from airflow_provider_dpone.adapters.clickhouse.type_names import decimal_parts

_FIXED: dict[str, str] = {
    "Int8": "<i1",
    "Int16": "<i2",
    "Int32": "<i4",
    "Int64": "<i8",
    "UInt8": "<u1",
    "UInt16": "<u2",
    "UInt32": "<u4",
    "UInt64": "<u8",
    "Float32": "<f4",
    "Float64": "<f8",
}
#: Native's day (UInt16 days) and moment (UInt32 seconds) ranges: outside them clickhouse-connect decides
_DATE_MAX = 65_535
_DATETIME_MAX = 2**32 - 1


def _leb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _string(text: str) -> bytes:
    encoded = text.encode()
    return _leb128(len(encoded)) + encoded


def _numbers(array: pa.Array) -> np.ndarray:
    """The array's values as numpy, a NULL's slot as 0 (Native's default under its null map)."""
    if array.null_count:
        array = pc.fill_null(array, pa.scalar(0, array.type))
    values: np.ndarray = array.to_numpy(zero_copy_only=False)
    return values


def _ranged(values: np.ndarray, high: int, dtype: str) -> bytes | None:
    """Days or seconds since the epoch as ``dtype``, if every one is within ``0..high``."""
    values = values.astype("<i8")
    if len(values) and (values.min() < 0 or values.max() > high):
        return None
    return values.astype(dtype).tobytes()


def _decimals(array: pa.Array, precision: int) -> bytes | None:
    """A ``decimal128`` array as ClickHouse stores ``Decimal(precision, s)``: the unscaled integer in 4, 8
    or 16 little-endian bytes (its precision bounds it, so the low bytes are the whole value)."""
    width = 4 if precision <= 9 else 8 if precision <= 18 else 16 if precision <= 38 else 0
    if not width:
        return None
    words = np.frombuffer(array.buffers()[1], dtype="<u8")[2 * array.offset : 2 * (array.offset + len(array))]
    pairs = words.reshape(-1, 2).copy()
    if array.null_count:
        pairs[array.is_null().to_numpy(zero_copy_only=False)] = 0
    if width == 16:
        return pairs.tobytes()
    low = pairs[:, 0].view("<i8")
    return (low if width == 8 else low.astype("<i4")).tobytes()


def _strings(array: pa.Array) -> bytes:
    """Each value as its length (LEB128) and its bytes: the length prefixes are built with array
    operations, then joined to their values by Arrow (``binary_join_element_wise``), whose data buffer is
    then exactly the Native column (a scatter of every byte through numpy took 2.4x as long)."""
    array = array.cast(pa.large_binary())
    if array.null_count:
        array = pc.fill_null(array, pa.scalar(b"", pa.large_binary()))
    offsets = np.frombuffer(array.buffers()[1], dtype="<i8")[array.offset : array.offset + len(array) + 1]
    lengths = np.diff(offsets)
    prefix = np.ones(len(lengths), dtype=np.int64)
    for bits in (7, 14, 21, 28, 35, 42, 49, 56):
        prefix += lengths >= (1 << bits)
    ends = np.cumsum(prefix)
    starts = ends - prefix
    head = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.uint8)
    for k in range(int(prefix.max()) if len(prefix) else 0):
        has = prefix > k
        byte = (lengths[has] >> (7 * k)) & 0x7F
        more = prefix[has] > k + 1
        head[starts[has] + k] = (byte | np.where(more, 0x80, 0)).astype(np.uint8)
    head_offsets = np.concatenate(([0], ends)).astype("<i8")
    heads = pa.Array.from_buffers(
        pa.large_binary(), len(lengths), [None, pa.py_buffer(head_offsets), pa.py_buffer(head)]
    )
    joined = pc.binary_join_element_wise(heads, array, pa.scalar(b"", pa.large_binary()))
    size = int(np.frombuffer(joined.buffers()[1], dtype="<i8")[joined.offset + len(joined)])
    data = joined.buffers()[2]
    return b"" if data is None else data.slice(0, size).to_pybytes()


def _column(array: pa.Array, base: str) -> bytes | None:
    """The values of one column as Native writes them, a NULL's slot as the type's default."""
    fixed = _FIXED.get(base)
    if fixed is not None:
        return np.ascontiguousarray(_numbers(array), dtype=fixed).tobytes()
    if base == "String":
        return _strings(array)
    if base == "Date":
        return _ranged(_numbers(array.cast(pa.int32())), _DATE_MAX, "<u2")
    if base == "DateTime":
        return _ranged(_numbers(array.cast(pa.int64())), _DATETIME_MAX, "<u4")
    decimal = decimal_parts(base)
    if decimal and pa.types.is_decimal128(array.type):
        return _decimals(array, decimal[0])
    return None


def native_body(table: pa.Table, type_names: Sequence[str], wire_names: Sequence[str]) -> bytes | None:
    """One Native block of ``table``: its column names, the target's ``type_names`` deciding the layout,
    ``wire_names`` the type names written (clickhouse-connect's ``insert_name``). ``None`` when a column is
    not one this module writes exactly (see the module)."""
    out = bytearray()
    out += _leb128(table.num_columns)
    out += _leb128(table.num_rows)
    columns = zip(table.column_names, type_names, wire_names, table.columns, strict=True)
    for name, type_name, wire_name, chunked in columns:
        array = chunked.combine_chunks() if chunked.num_chunks != 1 else chunked.chunk(0)
        base = strip_nullable(type_name)
        nullable = base != type_name
        if array.null_count and not nullable:
            return None  # a NULL the column cannot hold: clickhouse-connect's encoder refuses it
        values = _column(array, base)
        if values is None:
            return None
        out += _string(name)
        out += _string(wire_name)
        if nullable:
            out += array.is_null().to_numpy(zero_copy_only=False).astype(np.uint8).tobytes()
        out += values
    return bytes(out)
