"""The one reader of ClickHouse type names: how a type is spelled, what a Decimal type holds, what a
``LowCardinality`` column stores, and which type holds every value of another.

The sink's compatibility check and the artifacts' Arrow schema both read types here, so ``Decimal256(2)``
means ``Decimal(76, 2)`` to both.
"""

from __future__ import annotations

import re

#: Digits of each ``DecimalNN(S)`` alias.
DECIMAL_ALIAS_PRECISION = {"32": 9, "64": 18, "128": 38, "256": 76}
_DECIMAL = re.compile(r"^Decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_DECIMAL_ALIAS = re.compile(r"Decimal(32|64|128|256)\(\s*(\d+)\s*\)")
#: The dictionary encodings a target column may add to what the source gives: the strings of a ``String``
#: column, stored once per distinct value. Only ``String`` (the type most often declared so by hand): the
#: loads were proven exact for it, on chDB and on the 18.16 server, not for other inner types.
_LOW_CARDINALITY = re.compile(r"^LowCardinality\((String|Nullable\(String\))\)$")
_INTEGER = re.compile(r"^(U?)Int(8|16|32|64)$")
#: ``DateTime`` with a time zone: the same epoch seconds as ``DateTime`` (the zone only says how the server
#: shows and parses them), common in hand-made tables (``DateTime('UTC')``).
_ZONED_DATETIME = re.compile(r"^DateTime\('[^'\\]*'\)$")
#: ``DateTime64(P[, 'zone'])``: ticks of 10^-P seconds; every whole-second ``DateTime`` value is one exactly
#: (its range, 1900-2299, holds ``DateTime``'s). Normalized spelling (no blanks).
_DATETIME64 = re.compile(r"^DateTime64\((\d)(?:,'[^'\\]*')?\)$")


def normalize_type(type_name: str) -> str:
    """One spelling per type: no blanks around commas or parentheses, Decimal aliases expanded."""
    text = re.sub(r"\s*([,()])\s*", r"\1", type_name.strip())
    return _DECIMAL_ALIAS.sub(lambda m: f"Decimal({DECIMAL_ALIAS_PRECISION[m.group(1)]},{m.group(2)})", text)


def decimal_parts(type_name: str) -> tuple[int, int] | None:
    """``(precision, scale)`` of a ``Decimal(P, S)`` or ``DecimalNN(S)`` type (no wrappers), else None."""
    match = _DECIMAL.match(normalize_type(type_name))
    return (int(match.group(1)), int(match.group(2))) if match else None


def stored_type(type_name: str) -> str:
    """The type whose values a column holds, normalized: ``LowCardinality(String)`` holds ``String``
    values and ``LowCardinality(Nullable(String))`` ``Nullable(String)`` ones (the dictionary is how they
    are stored, not what they are). Any other type is its own."""
    normalized = normalize_type(type_name)
    match = _LOW_CARDINALITY.match(normalized)
    return match.group(1) if match else normalized


def holds_every_value(source: str, target: str) -> bool:
    """Whether a ``target`` column holds every value of a ``source`` column exactly (both normalized, no
    ``Nullable``): the same type; a wider integer of the same signedness, or a signed one of more bits for
    an unsigned one (``Int64`` for SQL Server's ``int``, a common hand-made target); ``Float64`` for
    ``Float32``; a ``Decimal`` with at least the digits on both sides of the point (``Decimal(18, 4)`` for
    ``Decimal(12, 2)``: every load writes the value at the target's scale, tested on each path); a
    ``DateTime('zone')`` for ``DateTime`` (the same epoch seconds; every load hands them over as integers and
    every predicate compares instants); a ``DateTime64(P[, 'zone'])`` for ``DateTime`` (whole seconds are
    whole ticks: the loads hand it the seconds times 10^P) and a ``Date32`` for ``Date`` (the same day numbers,
    a wider range). Nothing else: an integer into a float stores another kind of number, and no other load
    was proven exact."""
    if source == target:
        return True
    if source == "DateTime" and (_ZONED_DATETIME.match(target) or _DATETIME64.match(target)):
        return True
    if (source, target) == ("Date", "Date32"):
        return True
    source_int, target_int = _INTEGER.match(source), _INTEGER.match(target)
    if source_int and target_int:
        source_unsigned, target_unsigned = source_int.group(1) == "U", target_int.group(1) == "U"
        wider = int(target_int.group(2)) > int(source_int.group(2))
        return wider and (source_unsigned or not target_unsigned)
    if (source, target) == ("Float32", "Float64"):
        return True
    source_decimal, target_decimal = decimal_parts(source), decimal_parts(target)
    if source_decimal and target_decimal:
        (source_precision, source_scale), (target_precision, target_scale) = source_decimal, target_decimal
        return (
            target_scale >= source_scale
            and target_precision - target_scale >= source_precision - source_scale
        )
    return False


def base_type(type_name: str) -> str:
    """The type inside any ``Nullable(...)``/``LowCardinality(...)`` wrappers, in whatever order they nest
    (``LowCardinality(Nullable(String))`` is ``String``: unwrapping ``Nullable`` first left it half done)."""
    unwrapped = True
    while unwrapped:
        unwrapped = False
        for wrapper in ("Nullable(", "LowCardinality("):
            if type_name.startswith(wrapper) and type_name.endswith(")"):
                type_name = type_name[len(wrapper) : -1]
                unwrapped = True
    return type_name


def ticks_per_second(type_name: str) -> int | None:
    """10^P for a ``DateTime64(P[, 'zone'])`` type (wrappers allowed), else None: what a whole second is
    in that column's ticks."""
    match = _DATETIME64.match(base_type(normalize_type(type_name)))
    return 10 ** int(match.group(1)) if match else None
