"""The sink's column-at-once encoders write exactly the bytes clickhouse-connect's own encoders write.

Real clickhouse-connect types, no server: each case encodes one column with the stock type and with the
type ``column_types`` picks, and compares the Native bytes (null map included). Values the fast path does
not take (ints, floats, text) must fall back to the stock encoder and still match.
"""

from __future__ import annotations

import calendar
import random
import time
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from clickhouse_connect.datatypes.registry import get_from_name

from airflow_provider_dpone.adapters.clickhouse.column_encoders import AVAILABLE, column_types, insert_columns

_rand = random.Random(20261202)


class _InsertContext:
    """What the encoders read from clickhouse-connect's InsertContext: the column name, no formats."""

    column_name = "c"

    def active_fmt(self, *_args: object) -> None:
        return None

    def __getattr__(self, _name: str) -> None:
        return None


def _random_decimals(count: int, scale: int) -> list[Decimal]:
    return [Decimal(_rand.randint(-(10**11), 10**11)).scaleb(-scale) for _ in range(count)]


CASES: list[tuple[str, list[object]]] = [
    ("Decimal(12, 2)", [*_random_decimals(2000, 2), Decimal("0"), Decimal("-0.01"), Decimal("1.239"), 5]),
    (
        "Nullable(Decimal(18, 4))",
        [None, Decimal("1.2345"), Decimal("0"), None, Decimal("-99999999999999.9999")],
    ),
    ("Decimal(9, 0)", [Decimal("123456789"), Decimal("-1"), Decimal("2.5")]),
    ("Decimal(12, 2)", [1.25, 3.333, 0.1]),  # floats: the stock encoder's path
    (
        "Date",
        [date(1970, 1, 1), date(2149, 6, 6), *(date(2000, 1, 1) + timedelta(days=d) for d in range(900))],
    ),
    ("Nullable(Date)", [None, date(1999, 12, 31), None, date(2026, 11, 30)]),
    ("Date", [datetime(2026, 3, 29, 23, 59, 59), datetime(1970, 1, 1)]),  # datetimes in a Date column
    ("Date", [1, 2, 20_000]),  # already days: the stock encoder's int path
    ("Decimal(38, 4)", [Decimal("1.5"), Decimal("123456789012345678901234.1234")]),  # 128-bit: stock type
]


@pytest.mark.skipif(not AVAILABLE, reason="this clickhouse-connect's internals differ; stock encoders in use")
@pytest.mark.parametrize(("type_name", "values"), CASES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CASES)])
def test_fast_encoders_write_the_same_native_bytes_as_clickhouse_connect(
    type_name: str, values: list[object]
) -> None:
    stock = get_from_name(type_name)
    (chosen,) = column_types([type_name])
    assert chosen.name == stock.name  # the Native block header carries the same type name

    expected, written = bytearray(), bytearray()
    stock.write_column(values, expected, _InsertContext())
    chosen.write_column(values, written, _InsertContext())

    assert written == expected


def test_the_fast_encoders_are_chosen_for_decimal_and_date() -> None:
    names = ["Decimal(12, 2)", "Nullable(Date)", "DateTime", "String", "Int64", "Decimal(38, 2)"]
    kinds = [type(t).__name__ for t in column_types(names)]
    if AVAILABLE:
        assert kinds[:2] == ["FastDecimal", "FastDate"]
    assert kinds[2:] == ["DateTime", "String", "Int64", "BigDecimal"]


DATETIMES: list[list[object]] = [
    [datetime(1970, 1, 1), datetime(2106, 2, 7, 6, 28, 15), datetime(2026, 3, 8, 2, 30)],  # a New York gap
    [datetime(2000, 1, 1) + timedelta(seconds=_rand.randint(0, 10**9)) for _ in range(1500)],
    [None, datetime(2020, 5, 5, 5, 5, 5), None],
    [datetime(2020, 5, 5, 5, 5, 5, tzinfo=timezone(timedelta(hours=3))), datetime(2020, 1, 1)],  # aware
    [0, 10, 2**31],  # epoch seconds already
]


def _utc_reference(value: object) -> object:
    if not isinstance(value, datetime):
        return value
    aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return calendar.timegm(aware.utctimetuple())


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kathmandu"])
@pytest.mark.parametrize("values", DATETIMES, ids=[f"datetimes-{i}" for i in range(len(DATETIMES))])
def test_datetimes_are_written_as_utc_epoch_seconds_whatever_the_process_zone(
    values: list[object], zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        (seconds,) = insert_columns(["Nullable(DateTime)"], [values])
        (untouched,) = insert_columns(["Nullable(Date)"], [values])
    finally:
        monkeypatch.undo()
        time.tzset()
    assert seconds == [_utc_reference(v) for v in values]
    assert untouched is values


def test_a_value_the_column_cannot_hold_fails_like_the_stock_encoder() -> None:
    (chosen,) = column_types(["Date"])
    with pytest.raises(Exception) as fast_error:
        chosen.write_column(["2026-01-01"], bytearray(), _InsertContext())
    with pytest.raises(Exception) as stock_error:
        get_from_name("Date").write_column(["2026-01-01"], bytearray(), _InsertContext())
    assert type(fast_error.value) is type(stock_error.value)
