"""The SQLite value audit never passes a value that the read refuses or reads otherwise.

On ``lazy_plan + direct`` the rows are converted inside the guarded target call: a text the audit passed
and the converters refuse stops the run after arming (``target_outcome_unknown``, the route blocked). Two
such texts were found by a generated search like this one: ``2026-11-01 24:00:00`` (SQLite's
``datetime()`` keeps hour 24 unless a modifier normalizes it, Python refuses it) and text with a NUL
(SQLite's functions stop at it, Python's parser takes any character between date and time:
``2026-01-01\\x002024`` was midnight to the audit and 20:24 to the read). Each generated text is classified
by the audit's own expression in a real SQLite and converted by the read's converter; where the audit
passes, the converter must accept it and agree with SQLite on the day or instant. Numbers the same way:
integers, reals and numeric text the audit passes for a ``Decimal``, integer, flag or float column are
accepted by the converter, and a decimal arrives as the number SQLite holds.
"""

from __future__ import annotations

import sqlite3
from datetime import date, datetime
from decimal import Decimal

from hypothesis import example, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import column_values, value_audit
from airflow_provider_dpone.contracts.schema import ColumnSpec

_DATES = ["2026-11-01", "2026-02-28", "2024-02-29", "2023-02-29", "2026-11-30", "1970-01-01", "2106-02-07"]
_SEPARATORS = ["", " ", "T", "t", "x", "\x00", "\t", "  "]
_TIMES = ["", "00:00:00", "23:59:59", "24:00:00", "24:59:59", "10:00", "10", "1000", "06:28:15", "23:59:60"]
_TAILS = [
    "",
    "Z",
    "z",
    "+02:00",
    "-05:00",
    "+0200",
    "+02",
    " +02:00",
    "+24:00",
    ".0",
    ".5",
    ".000000001",
    ",0",
]
_NOISE = st.text(alphabet="0123456789:-+. TZ\x00\u00a0\u3000x", max_size=4)


@st.composite
def date_like(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(_DATES)) + draw(st.sampled_from(_SEPARATORS)) + draw(st.sampled_from(_TIMES))
    text += draw(st.sampled_from(_TAILS)) + draw(_NOISE)
    return draw(st.sampled_from(["", " "])) + text + draw(st.sampled_from(["", " "]))


def _audit(kind: str) -> tuple[sqlite3.Connection, str]:
    connection = sqlite3.connect(":memory:")
    value_audit.register_functions(connection)
    connection.execute("CREATE TABLE t (x)")
    column = ColumnSpec(name="x", clickhouse_type=kind, nullable=True)
    classifier = value_audit._classifier(column, set(), value_audit.WIDEST)
    assert classifier is not None
    return connection, classifier.expression()


def _passes(connection: sqlite3.Connection, expression: str, text: str) -> tuple[bool, str | None]:
    """Whether the audit passes ``text``, and SQLite's own reading of it (``datetime()`` of the trimmed text)."""
    connection.execute("DELETE FROM t")
    connection.execute("INSERT INTO t VALUES (?)", (text,))
    code, reading = connection.execute(f"SELECT {expression}, datetime(trim(x)) FROM t").fetchone()
    return code == 0, reading


_DATETIME_AUDIT = _audit("DateTime")
_DATE_AUDIT = _audit("Date")
_DATETIMES = column_values.datetimes(ColumnSpec(name="x", clickhouse_type="DateTime", nullable=True))
_DAYS = column_values.dates(ColumnSpec(name="x", clickhouse_type="Date", nullable=True))


@settings(max_examples=1500, deadline=None)
@given(date_like())
def test_a_datetime_text_the_audit_passes_is_read_as_the_instant_sqlite_reads(text: str) -> None:
    passed, reading = _passes(*_DATETIME_AUDIT, text)
    if passed:
        assert reading is not None
        assert _DATETIMES([text]) == [datetime.fromisoformat(reading)]


@settings(max_examples=1500, deadline=None)
@given(date_like())
def test_a_date_text_the_audit_passes_is_read_as_the_day_sqlite_reads(text: str) -> None:
    passed, reading = _passes(*_DATE_AUDIT, text)
    if passed:
        assert reading is not None
        assert _DAYS([text]) == [date.fromisoformat(reading[:10])]


def test_the_texts_found_are_refused_by_the_audit() -> None:
    for text in ("2026-11-01 24:00:00", "2026-11-01 24:59:59", "2026-11-30\x002024", "2026-11-30x10:00:00"):
        assert not _passes(*_DATETIME_AUDIT, text)[0], repr(text)
    assert not _passes(*_DATE_AUDIT, "2026-01-01\x002024")[0]


_NUMBER_TEXT = st.from_regex(r"\A[ +-]?[0-9]{0,17}(\.[0-9]{0,8})?([eE][+-]?[0-9]{1,3})?[ ]?\Z")
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=True),
    st.decimals(min_value=-(10**16), max_value=10**16, places=4, allow_nan=False).map(float),
    _NUMBER_TEXT,
)
_NUMBER_KINDS = [
    "Decimal(12, 2)",
    "Decimal(15, 0)",
    "Decimal(18, 4)",
    "Decimal(38, 10)",
    "Int64",
    "UInt8",
    "Float64",
]
_NUMBER_AUDITS = {kind: _audit(kind) for kind in _NUMBER_KINDS}


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(_NUMBER_KINDS), _NUMBERS)
@example("Int64", 2**53 + 1)  # a whole number no double holds: compared as the integer it is
@example("UInt8", 1.0)  # an untyped column keeps a REAL flag
@example("Decimal(12, 2)", "0.1")
def test_a_number_the_audit_passes_is_read_as_the_number_sqlite_holds(kind: str, value: object) -> None:
    connection, expression = _NUMBER_AUDITS[kind]
    connection.execute("DELETE FROM t")
    connection.execute("INSERT INTO t VALUES (?)", (value,))
    code, stored = connection.execute(f"SELECT {expression}, x FROM t").fetchone()
    if code != 0 or stored is None:
        return
    convert = column_values.converter_for(ColumnSpec(name="x", clickhouse_type=kind, nullable=True))
    read = convert([stored])[0] if convert is not None else stored
    if kind.startswith("Decimal"):
        held = Decimal(repr(stored)) if isinstance(stored, float) else Decimal(str(stored).strip())
        assert Decimal(read) == held
    elif kind == "Float64":
        assert float(read) == float(stored)
    else:  # integers and flags go on as stored: whole numbers (an untyped flag may hold the REAL 0.0 or 1.0)
        assert read == stored and (isinstance(read, int) or float(read).is_integer())
