"""Each insert block's dates against the target's range (``calendar_limits``), Arrow and Python alike."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.calendar_limits import outside_limits
from airflow_provider_dpone.adapters.clickhouse.column_encoders import LEGACY_LIMITS
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn

DAYS = st.dates(min_value=date(1970, 1, 1), max_value=date(2149, 6, 6))


@settings(deadline=None)  # the first call loads pyarrow.compute
@given(days=st.lists(st.one_of(st.none(), DAYS), max_size=20))
def test_a_date_column_is_outside_exactly_when_a_value_passes_the_targets_last_day(
    days: list[date | None],
) -> None:
    present = [d for d in days if d is not None]
    expected = bool(present) and max(present) > LEGACY_LIMITS["date_max"]
    for column in (days, ArrowColumn(pa.array(days, pa.date32()))):
        found = outside_limits(["Nullable(Date)", "String"], [column, ["x"] * len(days)], LEGACY_LIMITS)
        assert (found is not None) is expected
        if found is not None:
            assert found[0] == 0


@pytest.mark.parametrize("type_name", ["DateTime", "DateTime('UTC')", "LowCardinality(Nullable(DateTime))"])
def test_a_datetime_past_the_servers_last_second_is_found_in_python_and_arrow_values(type_name: str) -> None:
    late = datetime(2106, 2, 7, 3, 0, 0)
    assert outside_limits([type_name], [[datetime(2026, 1, 1), late]], LEGACY_LIMITS) is not None
    arrow = ArrowColumn(pa.array([datetime(2026, 1, 1), late], pa.timestamp("s")))
    assert outside_limits([type_name], [arrow], LEGACY_LIMITS) is not None
    zoned = ArrowColumn(pa.array([late.replace(tzinfo=timezone.utc)], pa.timestamp("s", tz="UTC")))
    assert outside_limits([type_name], [zoned], LEGACY_LIMITS) is not None
    assert outside_limits([type_name], [[datetime(2106, 2, 6, 23, 59, 59), None]], LEGACY_LIMITS) is None
