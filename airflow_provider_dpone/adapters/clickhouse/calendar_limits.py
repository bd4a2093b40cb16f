"""Calendar values checked against the target's own range in every insert block, on a narrow target.

The source's value audit refuses, before arming, a date or datetime the target cannot hold exactly
(``column_encoders.value_limits``: ClickHouse 18.16 stores a ``Date`` past 2106-02-07 as sent but reads it
as 1970-01-01). A row that reached the source after the audit (another writer, between the audit and the
read) met no such check: the encoders refuse only what the type's own range cannot hold, so it was
committed as 1970-01-01, exit 0. Each block is checked before it is sent, on targets narrower than their
types (current engines hold the whole range: nothing to check there).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.adapters.clickhouse.type_names import base_type
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.ports.source import ValueLimits


def outside_limits(
    type_names: Sequence[str], columns: Sequence[Sequence[object]], limits: ValueLimits
) -> tuple[int, str, str] | None:
    """The first ``Date``/``DateTime`` column holding a value outside ``limits``: (its index, the
    range's low and high as text), or None."""
    for index, (type_name, values) in enumerate(zip(type_names, columns, strict=True)):
        base = base_type(type_name)
        low: date
        high: date
        if base == "Date":
            low, high = limits["date_min"], limits["date_max"]
        elif base == "DateTime" or base.startswith("DateTime("):
            low, high = limits["datetime_min"], limits["datetime_max"]
        else:
            continue
        lowest, highest = _range_of(values)
        if lowest is not None and highest is not None and (lowest < low or highest > high):
            return index, str(low), str(high)
    return None


def _range_of(values: Sequence[object]) -> tuple[date | None, date | None]:
    """The smallest and largest value, as naive UTC (NULLs left out)."""
    if isinstance(values, ArrowColumn):
        found = pc.min_max(values.array)
        return _naive(found["min"]), _naive(found["max"])
    present = [moment for moment in map(_naive, values) if moment is not None]
    return (min(present), max(present)) if present else (None, None)


def _naive(value: object) -> date | None:
    if isinstance(value, pa.Scalar):
        value = value.as_py()
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    if isinstance(value, date):
        return value
    return None
