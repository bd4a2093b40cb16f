"""Reference checksums: what every benchmark system must have written for the orders shape.

A fast wrong transfer fails the benchmark: after each measurement the child reads the target's count,
sum of ids, exact sum of amounts (cents), sum of order dates (days since the epoch), sum of update
times (UTC epoch seconds) and sum of customer name lengths, and the parent compares them with the
same figures computed from the SQLite source (the project's rounding: amounts to the cent).
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

FIELDS = ("rows", "sum_id", "sum_amount_cents", "sum_order_days", "sum_updated_epoch", "sum_customer_chars")

TARGET_SQL = (
    "SELECT count(), sum(id), toString(sum(amount)), sum(toUInt32(order_date)), "
    "sum(toUInt32(updated_at)), sum(lengthUTF8(customer)) FROM {table}"
)
SOURCE_SQL = (
    "SELECT count(*), sum(id), sum(CAST(round(amount * 100) AS INTEGER)), "
    "sum(CAST(julianday(substr(order_date, 1, 10)) - 2440587.5 AS INTEGER)), "
    "sum(CAST(strftime('%s', updated_at) AS INTEGER)), sum(length(customer)) FROM {table}"
)


def source_checksum(path: Path, table: str = "orders") -> dict[str, int]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = db.execute(SOURCE_SQL.format(table=table)).fetchone()
    finally:
        db.close()
    return dict(zip(FIELDS, (int(v or 0) for v in row), strict=True))


def target_checksum(client: Any, table: str) -> dict[str, int]:
    rows, sum_id, amount, days, epoch, chars = client.query(TARGET_SQL.format(table=table)).result_rows[0]
    cents = Decimal(str(amount)) * 100
    if cents != cents.to_integral_value():
        raise AssertionError("the target's amounts are not whole cents")
    values = (rows, sum_id, int(cents), days, epoch, chars)
    return dict(zip(FIELDS, (int(v) for v in values), strict=True))


def read_target(target: dict[str, Any], table: str) -> dict[str, int]:
    """Open the target (chDB path or server port) after the measured work and read its checksum."""
    from transfer_raw import open_target

    client = open_target(target)
    try:
        return target_checksum(client, table)
    finally:
        client.close()
