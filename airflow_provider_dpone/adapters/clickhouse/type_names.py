"""The one reader of ClickHouse type names: how a type is spelled, and what a Decimal type holds.

The sink's compatibility check and the artifacts' Arrow schema both read types here, so ``Decimal256(2)``
means ``Decimal(76, 2)`` to both.
"""

from __future__ import annotations

import re

#: Digits of each ``DecimalNN(S)`` alias.
DECIMAL_ALIAS_PRECISION = {"32": 9, "64": 18, "128": 38, "256": 76}
_DECIMAL = re.compile(r"^Decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_DECIMAL_ALIAS = re.compile(r"Decimal(32|64|128|256)\(\s*(\d+)\s*\)")


def normalize_type(type_name: str) -> str:
    """One spelling per type: no blanks around commas or parentheses, Decimal aliases expanded."""
    text = re.sub(r"\s*([,()])\s*", r"\1", type_name.strip())
    return _DECIMAL_ALIAS.sub(lambda m: f"Decimal({DECIMAL_ALIAS_PRECISION[m.group(1)]},{m.group(2)})", text)


def decimal_parts(type_name: str) -> tuple[int, int] | None:
    """``(precision, scale)`` of a ``Decimal(P, S)`` or ``DecimalNN(S)`` type (no wrappers), else None."""
    match = _DECIMAL.match(normalize_type(type_name))
    return (int(match.group(1)), int(match.group(2))) if match else None
