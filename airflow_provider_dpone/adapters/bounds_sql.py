"""One bounds -> SQL condition builder for every engine: the SQLite and SQL Server sources, the ClickHouse
sink and the target reader all select a partition's rows the same way.

The shape is decided here once (``ALL`` selects everything, a range is ``lower <= column < upper`` with
either side optional, a list is ``column IN (...)``, an empty list selects nothing); each engine supplies a
:class:`BoundsDialect` for what differs: quoting, literals or bound parameters, and how its column types
compare with a bound's value type. A condition is the dialect's own fragment type (text with parameters
for the sources, plain text for ClickHouse).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Protocol, TypeVar

from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

Fragment = TypeVar("Fragment")


class BoundsDialect(Protocol[Fragment]):
    """How one engine writes the pieces of a partition condition."""

    def compare(self, column: str, operator: str, value: str, value_type: str) -> Fragment:
        """``column <operator> value`` (operator ``>=`` or ``<``), the value typed as ``value_type``."""

    def all_of(self, parts: Sequence[Fragment]) -> Fragment:
        """The conjunction of non-empty ``parts``."""

    def member(self, column: str, values: Sequence[str], value_type: str) -> Fragment:
        """``column IN (values)`` for a non-empty list."""

    def nothing(self) -> Fragment:
        """A condition no row satisfies (an empty value list)."""

    def invalid(self, reason: str) -> Exception:
        """The engine's error for bounds that cannot be written (raised by the builder)."""


def bounds_condition(bounds: PartitionBounds, dialect: BoundsDialect[Fragment]) -> Fragment | None:
    """The condition selecting the partition's rows; ``None`` when it selects every row (``ALL``, or a
    range with neither side)."""
    if bounds.kind is BoundsKind.ALL:
        return None
    if not bounds.column:
        raise dialect.invalid("partition bounds name no column")
    column = bounds.column
    if bounds.kind is BoundsKind.RANGE:
        parts: list[Fragment] = []
        if bounds.lower is not None:
            parts.append(dialect.compare(column, ">=", bounds.lower, bounds.value_type))
        if bounds.upper is not None:
            parts.append(dialect.compare(column, "<", bounds.upper, bounds.value_type))
        return dialect.all_of(parts) if parts else None
    values = bounds.values or ()
    if not values:
        return dialect.nothing()
    return dialect.member(column, values, bounds.value_type)


#: Whether ``low <= high`` as one engine compares a bound's value type (``None``: that side is open).
Ordered = Callable[[str | None, str | None, str], bool]


def merge_adjacent(bounds: Sequence[PartitionBounds], ordered: Ordered) -> list[PartitionBounds]:
    """The same rows as the union of ``bounds``, each run of adjacent ranges as one: ``[a, b)`` then ``[b, c)``
    on one column and value type become ``[a, c)`` when ``ordered`` says ``a <= b <= c`` in every order the
    engine may compare with (``[a, b) | [b, c)`` is ``[a, c)`` in any total order). Anything else stays."""
    merged: list[PartitionBounds] = []
    for one in bounds:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.kind is BoundsKind.RANGE
            and one.kind is BoundsKind.RANGE
            and (last.column, last.value_type) == (one.column, one.value_type)
            and last.upper is not None
            and last.upper == one.lower
            and ordered(last.lower, last.upper, one.value_type)
            and ordered(one.lower, one.upper, one.value_type)
        ):
            merged[-1] = last.model_copy(update={"upper": one.upper, "label": f"{last.label}..{one.label}"})
        else:
            merged.append(one)
    return merged


class FixedReason(ValueError):
    """A refused value whose message is a fixed phrase that never repeats the value: safe to show a user
    (a plain ``ValueError`` from ``date.fromisoformat`` and the like quotes its input)."""


def finite_number(text: str) -> Decimal:
    """A listed value of a number column as the number the engines compare it as (``FixedReason`` when it is
    no finite number)."""
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        raise FixedReason("not a number") from None
    if not number.is_finite():
        raise FixedReason("not a finite number")
    return number
