"""A C-speed exact path for decimal columns that mix integers and floats (SQLite ``NUMERIC``).

SQLite stores a ``NUMERIC(12,2)`` value with no fraction (``100.00``) as the integer ``100`` and the
others as REAL, so the demo's amount column holds both kinds; ``column_values.decimals`` then took its
per-value careful path for every row (about 1.5 us a value, the largest cost of a 1M-row run). This path
gives, value for value, exactly what that careful path gives — ``Decimal(v)`` for an integer,
``Decimal(repr(v))`` for a float — and is taken only when the careful path would accept every value:

* integers: within ``Decimal(p, s)``'s range (they have no digit past the scale);
* floats (only when ``p`` <= 15): within range and the scale's text reads back as the same double.
  Every decimal of at most 15 significant digits survives a round trip through a double, so that
  double's shortest form (``repr``) is that same decimal: at most 15 digits, none past the scale —
  exactly what the careful path checks.

Anything else (a boolean, text, NaN, a value out of range or with digits past the scale) returns
``None`` and the caller takes the careful path, which refuses with its own message.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence

#: Above this precision a float is never taken on this path (see the module docstring).
FLOAT_EXACT_DIGITS = 15


def int_float_decimals(
    values: Sequence[object], present: Sequence[object], precision: int, scale: int
) -> list[object] | None:
    """Exact decimals of an int/float column, or ``None`` when the careful path must decide.

    ``present`` is ``values`` without its ``None``s (the caller computes it anyway)."""
    kinds = set(map(type, present))
    if int not in kinds or not kinds <= {int, float}:
        return None  # float-only and Decimal columns have their own paths; anything else: careful path
    if float in kinds and precision > FLOAT_EXACT_DIGITS:
        return None
    limit = decimal.Context(prec=80).power(10, precision - scale)
    try:
        if not (-limit < min(present) and max(present) < limit):  # type: ignore[type-var, operator]
            return None
    except decimal.InvalidOperation:  # a NaN among the floats: the careful path refuses it
        return None
    if float in kinds:
        fmt = f"%.{scale}f"
        floats = [v for v in present if type(v) is float]
        if list(map(float, (fmt % v for v in floats))) != floats:
            return None
    to_decimal = decimal.Decimal
    return [
        None if v is None else to_decimal(repr(v)) if type(v) is float else to_decimal(v)  # type: ignore[arg-type]
        for v in values
    ]
