"""How long a column's file names get on a server that names files after columns (escaped per byte)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.file_names import escaped_length


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
