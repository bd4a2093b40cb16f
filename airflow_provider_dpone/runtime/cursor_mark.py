"""The cursor's high-water mark: one order over every value a cursor column can hold, and how a mark is
stored and read back.

A SQLite column may hold numbers, text and bytes at once (a ``TEXT`` column with a blob, an untyped one);
Python cannot compare ``str`` with ``bytes``, so the mark follows SQLite's own order instead: numbers, then
text, then bytes (then dates and times, which one column does not mix with the rest). Bytes (a SQL Server
``rowversion`` or ``varbinary`` cursor, a blob) are stored as ``0x`` and upper-case hex with their kind beside
them, so the next run reads them back as bytes and the mark never goes back.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable
from datetime import date, datetime, time, timezone
from decimal import Decimal

#: the state key naming a mark's kind when its JSON form alone does not say it
KIND_KEY = "high_water_kind"
BYTES_KIND = "bytes"

_UNREAD = object()


def order_key(value: object) -> tuple[object, ...]:
    """A key that orders any two cursor values (never raises): numbers < text < bytes < dates and times."""
    if isinstance(value, Decimal) and value.is_nan():
        return (4, "Decimal", str(value))  # a NaN decimal raises on comparison: ordered apart
    if isinstance(value, (bool, int, float, Decimal)):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return (2, bytes(value))
    if isinstance(value, datetime):
        return (3, value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc))
    if isinstance(value, date):
        return (3, datetime.combine(value, time.min, timezone.utc))
    return (4, type(value).__name__, str(value))


def highest(values: Iterable[object]) -> object | None:
    """The highest non-NULL value by :func:`order_key` (``None`` when there is none). One type, as almost
    every column holds, is compared as it is; a mix falls back to the key."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    try:
        return max(present)  # type: ignore[type-var]
    except (TypeError, ArithmeticError):  # text beside bytes, aware beside naive times, a NaN decimal
        return max(present, key=order_key)


def higher(first: object | None, second: object | None) -> object | None:
    """The higher of two marks by :func:`order_key`; ``None`` only when both are."""
    if first is None:
        return second
    if second is None:
        return first
    return second if order_key(second) > order_key(first) else first


def stored(value: object) -> dict[str, object]:
    """The state entries of a mark: ``high_water`` as JSON holds it, and its kind when JSON loses it."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"high_water": "0x" + bytes(value).hex().upper(), KIND_KEY: BYTES_KIND}
    if isinstance(value, (date, datetime)):
        return {"high_water": value.isoformat()}
    if isinstance(value, float) and not math.isfinite(value):
        return {"high_water": repr(value)}  # 'inf', '-inf', 'nan': JSON has no such number (the store refused
        # it after the commit: the run failed, and its mark was lost)
    return {"high_water": value if isinstance(value, (str, int, float)) else str(value)}


def later(moved: object, recorded: object, kind: object = None) -> object:
    """The higher of this run's cursor maximum and the mark recorded before: a run that moves only older
    rows (a late day, a lookback) keeps the mark where it was (seen: the mark went back a month). A
    recorded mark that does not compare with this run's values (another type) gives way to them. Marks
    stored as text are read back in the moved value's type: dates, decimals (a ``NUMERIC`` cursor's mark went
    back from 900.00 to 10.00), non-finite floats, bytes (a binary cursor's mark went back when it was kept
    as Python's text for bytes)."""
    if moved is None or recorded is None:
        return moved
    earlier = _read_back(moved, recorded, kind)
    if earlier is _UNREAD:
        return moved
    return earlier if order_key(earlier) > order_key(moved) else moved


def _read_back(moved: object, recorded: object, kind: object) -> object:
    try:
        if kind == BYTES_KIND:
            return _hex_bytes(recorded)
        if isinstance(moved, bytes) and isinstance(recorded, str):
            legacy = _python_bytes(recorded)  # marks of releases that kept bytes as Python's text for them
            return recorded if legacy is _UNREAD else legacy  # else a text value of a text-and-bytes column
        if isinstance(moved, datetime) and isinstance(recorded, str):
            return datetime.fromisoformat(recorded)
        if isinstance(moved, date) and not isinstance(moved, datetime) and isinstance(recorded, str):
            return date.fromisoformat(recorded)
        if isinstance(moved, Decimal) and isinstance(recorded, str):
            return Decimal(recorded)
        if isinstance(moved, float) and isinstance(recorded, (str, int)) and not isinstance(recorded, bool):
            return float(recorded)
        if isinstance(moved, (int, float, str)) and type(recorded) is type(moved) and type(moved) is not bool:
            return recorded
    except (TypeError, ValueError, ArithmeticError):  # decimal.InvalidOperation is an ArithmeticError
        return _UNREAD
    return _UNREAD


def _hex_bytes(recorded: object) -> object:
    if isinstance(recorded, str) and recorded[:2] in ("0x", "0X"):
        return bytes.fromhex(recorded[2:])
    return _UNREAD


def _python_bytes(recorded: str) -> object:
    if not recorded.startswith(("b'", 'b"')):
        return _UNREAD
    try:
        value = ast.literal_eval(recorded)
    except (ValueError, SyntaxError):
        return _UNREAD
    return value if isinstance(value, bytes) else _UNREAD
