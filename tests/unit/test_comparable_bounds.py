"""Which calendar bounds a target compares exactly (``comparable_bounds``), for every day of the range.

A day partition's exclusive upper bound is the next midnight: it is comparable exactly when that midnight
is a value of the column's type on this target, so the last day of each range (and 18.16's dates in 2106,
which it cannot parse as text) is refused, and every day before it is accepted.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.column_encoders import LEGACY_LIMITS, MODERN_LIMITS
from airflow_provider_dpone.adapters.clickhouse.comparable_bounds import (
    BOUND_OUTSIDE,
    bound_limits,
    require_comparable,
)
from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.ports.source import ValueLimits

TARGETS = {
    "modern": bound_limits(MODERN_LIMITS, legacy=False),
    "18.16": bound_limits(LEGACY_LIMITS, legacy=True),
}


def day(column: str, first: date) -> PartitionBounds:
    """The day partition the planner makes of ``first``."""
    return day_partitions(column, [first])[0]


def comparable(bounds: PartitionBounds, column_type: str, limits: ValueLimits) -> bool:
    try:
        require_comparable([bounds], {"at": column_type}, limits, "demo.ev")
    except DponeError as err:
        assert err.details["reason"] == BOUND_OUTSIDE and err.details["column"] == "at"
        return False
    return True


@pytest.mark.parametrize("target", list(TARGETS))
@given(first=st.dates(min_value=date(1970, 1, 1), max_value=date(2160, 1, 1)))
def test_a_day_is_comparable_exactly_when_its_next_midnight_is_a_value_of_the_type(
    target: str, first: date
) -> None:
    limits = TARGETS[target]
    following = first + timedelta(days=1)
    assert comparable(day("at", first), "Date", limits) is (following <= limits["date_max"])
    midnight = datetime.combine(following, datetime.min.time())
    assert comparable(day("at", first), "DateTime", limits) is (midnight <= limits["datetime_max"])
    assert comparable(day("at", first), "String", limits)  # text compares as text, whatever it says


def test_the_edges_measured_on_each_target() -> None:
    modern, legacy = TARGETS["modern"], TARGETS["18.16"]
    assert comparable(day("at", date(2149, 6, 5)), "Date", modern)
    assert not comparable(day("at", date(2149, 6, 6)), "Date", modern)  # toDate('2149-06-07') saturates
    assert comparable(day("at", date(2106, 2, 6)), "DateTime", modern)
    assert not comparable(day("at", date(2106, 2, 7)), "DateTime('UTC')", modern)
    assert comparable(day("at", date(2105, 12, 30)), "Date", legacy)
    assert not comparable(day("at", date(2105, 12, 31)), "Date", legacy)  # toDate('2106-01-01') is 0
    assert not comparable(day("at", date(2106, 2, 6)), "DateTime", legacy)


def test_listed_values_and_offsets() -> None:
    listed = PartitionBounds(
        kind=BoundsKind.VALUES, column="at", values=("2026-01-01", "2149-06-07"), value_type="date", label="x"
    )
    assert not comparable(listed, "Date", TARGETS["modern"])
    with_offset = PartitionBounds(
        kind=BoundsKind.RANGE,
        column="at",
        lower="2026-01-01T00:00:00+02:00",
        upper="2026-01-02T00:00:00+02:00",
        value_type="datetime",
        label="y",
    )
    assert not comparable(with_offset, "DateTime", TARGETS["modern"])
