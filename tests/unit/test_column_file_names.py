"""How long a column's file names get on a server that names files after columns (escaped per byte)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.file_names import (
    StoredColumn,
    escaped_length,
    longest_file_name,
)


def _escape_for_file_name(name: str) -> str:
    """The server's rule, written out: word bytes as they are, every other byte as ``%XX``."""
    return "".join(
        chr(byte) if chr(byte).isascii() and (chr(byte).isalnum() or chr(byte) == "_") else f"%{byte:02X}"
        for byte in name.encode()
    )


@given(st.text())
def test_the_length_is_the_escaped_names(name: str) -> None:
    assert escaped_length(name) == len(_escape_for_file_name(name))


def test_examples_of_the_escape() -> None:
    assert escaped_length("order_date") == 10
    assert escaped_length("a b") == 5
    assert escaped_length("\u0434") == 6  # a Cyrillic letter: two bytes
    assert escaped_length("\u4e2d") == 9  # a CJK character: three bytes


def test_the_longest_file_name_follows_marks_substreams_and_the_partition_key() -> None:
    name = "\u0434" * 41  # 246 escaped

    def longest(type_name: str, *, adaptive: bool = False, key: bool = False) -> int:
        return longest_file_name(StoredColumn(name, type_name, key), adaptive_marks=adaptive) - 246

    assert longest("String") == len(".mrk")
    assert longest("Nullable(String)") == len(".null.mrk")
    assert longest("Nullable(String)", adaptive=True) == len(".null.mrk2")
    assert longest("LowCardinality(String)") == len(".dict.mrk")
    assert longest("LowCardinality(Nullable(String))") == len(".dict.null.mrk")  # seen on 18.16's disk
    assert longest("Array(LowCardinality(Nullable(String)))") == len(".dict.null.mrk")
    assert longest("Array(String)") == len(".size0.mrk")
    assert longest("Array(Array(Nullable(String)))") == len(".size1.mrk")
    assert longest("Date", key=True) == len("minmax_.idx")
    assert longest("Tuple(UInt8, UInt8)") == len("%2E1.mrk")
    assert longest("Tuple(UInt8, Nullable(String), UInt8)") == len("%2E3.null.mrk")
    assert longest("Array(Tuple(UInt8, UInt8))") == len(".size0.mrk")  # two files: sizes, then elements
