"""One bounds -> SQL condition builder for every engine: the SQLite and SQL Server sources, the ClickHouse
sink and the target reader all select a partition's rows the same way.

The shape is decided here once (``ALL`` selects everything, a range is ``lower <= column < upper`` with
either side optional, a list is ``column IN (...)``, an empty list selects nothing); each engine supplies a
:class:`BoundsDialect` for what differs: quoting, literals or bound parameters, and how its column types
compare with a bound's value type. A condition is the dialect's own fragment type (text with parameters
for the sources, plain text for ClickHouse).
"""

from __future__ import annotations

from collections.abc import Sequence
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
