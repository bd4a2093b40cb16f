"""Partition bounds the target compares exactly, checked before arming.

A bound is written as a literal of the column's own type (``predicates.literal``): ``toDateTime(epoch)``
on a ``DateTime`` column, ``toDate('YYYY-MM-DD')`` on a ``Date``. A literal past the type's range does not
fail: current engines saturate it (``toDate('2149-06-07')`` is 2149-06-06, ``toDateTime(2**32)`` the last
second), 18.16 wraps it to 1970 and parses no date text in 2106 at all (``toDate('2106-01-01')`` is
0000-00-00, although its ``Date`` holds days to 2106-02-07). So the last day or month a type holds had an
exclusive upper bound the target read wrongly: a replacing route's delete and the guard's counts missed
rows, and every re-run added the partition's rows again, exit 0. The values themselves were within range
(the value audit passed them); only their partition's bounds were not. Such a run now stops before arming.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, time

from airflow_provider_dpone.adapters.clickhouse.type_names import base_type
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.ports.source import ValueLimits

#: The ``reason`` detail of the refusal (stable, safe).
BOUND_OUTSIDE = "partition_bound_outside_target_range"
#: The last day ClickHouse 18.16 reads from date text (its date tables end with 2105).
LEGACY_DATE_TEXT_MAX = date(2105, 12, 31)


def bound_limits(limits: ValueLimits, *, legacy: bool) -> ValueLimits:
    """The calendar range a bound may name on this target: its values' range, and on 18.16 (``legacy``)
    no date text past :data:`LEGACY_DATE_TEXT_MAX`."""
    if not legacy:
        return limits
    return ValueLimits(
        date_min=limits["date_min"],
        date_max=min(limits["date_max"], LEGACY_DATE_TEXT_MAX),
        datetime_min=limits["datetime_min"],
        datetime_max=limits["datetime_max"],
    )


def require_comparable(
    bounds: Sequence[PartitionBounds], column_types: Mapping[str, str], limits: ValueLimits, table: str
) -> None:
    """Raise ``manifest_invalid`` (naming the column, never a value) when a calendar bound of ``bounds``
    lies outside ``limits`` for its column's type (``column_types``: name -> ClickHouse type); a text
    column compares the text and is not limited."""
    for one in bounds:
        if one.column is None or one.value_type not in ("date", "datetime"):
            continue
        column_type = column_types.get(one.column)
        kind = base_type(column_type) if column_type else ""
        if kind == "String" or kind.startswith("FixedString("):
            continue
        named = [one.lower, one.upper] if one.kind is BoundsKind.RANGE else list(one.values or ())
        as_datetime = one.value_type == "datetime" or kind.startswith("DateTime")
        for value in named:
            if value is not None and not _within(value, as_datetime, limits):
                raise _refusal(one.column, column_type, as_datetime, limits, table)


def _within(value: str, as_datetime: bool, limits: ValueLimits) -> bool:
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return False  # not a calendar bound this check can read: refuse rather than guess
    if moment.tzinfo is not None:
        return False  # an offset in a bound: the predicates write naive UTC wall times only
    if as_datetime:
        return limits["datetime_min"] <= moment <= limits["datetime_max"]
    if moment.time() != time():
        return False
    return limits["date_min"] <= moment.date() <= limits["date_max"]


def _refusal(
    column: str, column_type: str | None, as_datetime: bool, limits: ValueLimits, table: str
) -> DponeError:
    if as_datetime:
        low, high = (
            f"{limits['datetime_min']:%Y-%m-%d %H:%M:%S}",
            f"{limits['datetime_max']:%Y-%m-%d %H:%M:%S}",
        )
    else:
        low, high = limits["date_min"].isoformat(), limits["date_max"].isoformat()
    return DponeError(
        ErrorCode.MANIFEST_INVALID,
        f"partition column {column!r} ({column_type or 'unknown type'}): a partition of this run ends (or "
        f"starts) outside what the target's {'DateTime' if as_datetime else 'Date'} compares exactly "
        f"({low} .. {high}); its rows lie at the edge of the type's range",
        details={"column": column, "clickhouse_type": column_type, "reason": BOUND_OUTSIDE, "table": table},
        hint_lines=(
            "nothing was written and no checkpoint recorded: the route is not blocked",
            "map or filter such values (often placeholders like 2106-02-07 or 2149-06-06) in source.query, "
            "or partition the route by another column",
        ),
    )
