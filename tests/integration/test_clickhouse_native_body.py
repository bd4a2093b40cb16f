"""The Native body built from Arrow (``native_body``) is byte for byte what clickhouse-connect's encoder writes.

Offline: random blocks of every type the module writes, with NULLs, negative decimals and strings whose
length takes one to three LEB128 bytes, are encoded both ways and compared. What it does not write exactly
(a NULL in a column that is not Nullable, a day or moment outside Native's range, another type) gives
``None``, so clickhouse-connect's encoder and its refusals decide. The server round trip of the same path
is ``test_clickhouse_arrow_insert.py``.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from clickhouse_connect.driver.insert import InsertContext
from clickhouse_connect.driver.transform import NativeTransform
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.arrow_insert import arrow_table, arrow_type
from airflow_provider_dpone.adapters.clickhouse.column_encoders import column_types, insert_columns
from airflow_provider_dpone.adapters.clickhouse.native_body import native_body

EPOCH = dt.datetime(1970, 1, 1)


def _connect_bytes(type_names: list[str], data: list[list[object]]) -> tuple[bytes, list[str]]:
    """clickhouse-connect's Native body of one block (without the INSERT line), and its type names."""
    names = [f"c{i}" for i in range(len(type_names))]
    types = column_types(type_names)
    context = InsertContext(
        "t", names, types, data=insert_columns(type_names, data, types), column_oriented=True
    )
    context.block_row_count = 10**9  # one block
    context.compression = None
    sent = b"".join(NativeTransform.build_insert(context))
    return sent[sent.index(b"FORMAT Native\n") + len(b"FORMAT Native\n") :], [t.insert_name for t in types]


def _ours(type_names: list[str], data: list[list[object]], wire: list[str]) -> bytes | None:
    table = arrow_table([f"c{i}" for i in range(len(type_names))], type_names, data)
    assume(table is not None)  # no exact Arrow form (pyarrow refused a value): the sink goes Native as before
    assert table is not None
    return native_body(table, type_names, wire)


def _values(base: str) -> st.SearchStrategy[object]:
    if base.startswith(("Int", "UInt")):
        bits = int(base.removeprefix("U").removeprefix("Int"))
        signed = not base.startswith("U")
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
        return st.integers(low, high)
    if base == "Float64":
        return st.floats(allow_nan=False)
    if base == "String":
        return st.one_of(st.text(max_size=20), st.text(min_size=120, max_size=140), st.just("x" * 17_000))
    if base == "Date":
        return st.dates(dt.date(1970, 1, 1), dt.date(2149, 6, 6))
    if base == "DateTime":  # naive UTC, or the same moment with an offset (both sides convert to UTC)
        moments = st.integers(0, 2**32 - 1).map(lambda s: EPOCH + dt.timedelta(seconds=s))
        offsets = st.integers(-14 * 60, 14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
        aware = st.tuples(moments, offsets).map(
            lambda pair: pair[0].replace(tzinfo=dt.timezone.utc).astimezone(pair[1])
        )
        return st.one_of(moments, aware)
    precision, scale = (int(p) for p in base[len("Decimal(") : -1].split(","))
    limit = 10**precision - 1
    return st.integers(-limit, limit).map(lambda unscaled: Decimal(unscaled).scaleb(-scale))


BASES = [
    "Int8",
    "Int32",
    "Int64",
    "UInt8",
    "UInt16",
    "UInt64",
    "Float64",
    "String",
    "Date",
    "DateTime",
    "Decimal(9, 3)",
    "Decimal(12, 2)",
    "Decimal(18, 6)",
    "Decimal(38, 4)",
]


@st.composite
def blocks(draw: st.DrawFn) -> tuple[list[str], list[list[object]]]:
    rows = draw(st.integers(1, 30))  # the sink never inserts an empty block
    type_names, data = [], []
    for base in draw(st.lists(st.sampled_from(BASES), min_size=1, max_size=4)):
        nullable = draw(st.booleans())
        values = st.one_of(st.none(), _values(base)) if nullable else _values(base)
        type_names.append(f"Nullable({base})" if nullable else base)
        data.append(draw(st.lists(values, min_size=rows, max_size=rows)))
    return type_names, data


@settings(max_examples=300, deadline=None)
@given(block=blocks())
def test_the_body_is_clickhouse_connects_byte_for_byte(block: tuple[list[str], list[list[object]]]) -> None:
    type_names, data = block
    expected, wire = _connect_bytes(type_names, data)
    assert _ours(type_names, data, wire) == expected


@pytest.mark.parametrize(
    ("type_name", "values"),
    [
        ("Int64", [1, None]),  # a NULL the column cannot hold
        ("Date", [dt.date(2149, 6, 7)]),  # past UInt16 days
        ("Date", [dt.date(1969, 12, 31)]),  # before the epoch
        ("DateTime", [EPOCH - dt.timedelta(seconds=1)]),
        ("DateTime", [EPOCH + dt.timedelta(seconds=2**32)]),
    ],
)
def test_what_it_cannot_write_exactly_is_left_to_clickhouse_connect(
    type_name: str, values: list[object]
) -> None:
    kind = arrow_type(type_name)
    assert kind is not None
    # built directly: arrow_table itself already hands a NULL the column cannot hold to clickhouse-connect
    table = pa.table({"c": pa.array(values, type=kind)})
    assert native_body(table, [type_name], [type_name]) is None


def test_a_type_it_does_not_know_is_left_to_clickhouse_connect() -> None:
    table = arrow_table(["c"], ["Float32"], [[1.5]])
    assert table is not None
    assert native_body(table, ["Bool"], ["Bool"]) is None


@pytest.mark.parametrize(
    ("type_name", "kind", "width"),
    [("Nullable(Decimal(12, 2))", pa.decimal128(12, 2), 16), ("Nullable(Int64)", pa.int64(), 8)],
)
def test_a_nulls_slot_is_written_as_the_default_whatever_the_buffer_holds(
    type_name: str, kind: pa.DataType, width: int
) -> None:
    # computed arrays leave unspecified bytes under a NULL; Native writes the default there
    validity = pa.py_buffer(bytes([0b101]))  # rows 0 and 2 valid, row 1 NULL
    garbage = pa.py_buffer(bytes(range(1, 3 * width + 1)))
    zeroed = pa.py_buffer(
        bytes(range(1, width + 1)) + bytes(width) + bytes(range(2 * width + 1, 3 * width + 1))
    )
    dirty = pa.Array.from_buffers(kind, 3, [validity, garbage])
    clean = pa.Array.from_buffers(kind, 3, [validity, zeroed])
    bodies = [native_body(pa.table({"c": array}), [type_name], [type_name]) for array in (dirty, clean)]
    assert bodies[0] is not None and bodies[0] == bodies[1]
