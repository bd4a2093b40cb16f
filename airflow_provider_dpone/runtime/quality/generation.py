"""The generation one operation publishes, as the bounded reader's structured plan.

The generation is exactly the rows of the partitions the batch armed (the permit's bounds): the sink
scopes its strategy to them and inserts only rows read within them. Adjacent ranges are merged
(``[d1, d2) + [d2, d3) = [d1, d3)``) and value lists folded, which selects the same rows with fewer
predicates, so a first load of years of daily partitions still fits the selector limits. Nothing here
widens a selection: ranges merge only where one's upper bound is the next one's lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from airflow_provider_dpone.contracts.capsule import QualityPolicy
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.target_observation import (
    MAX_SELECTOR_PARTITIONS,
    GenerationSelector,
    TargetReadRequest,
)
from airflow_provider_dpone.runtime.quality.policy import all_warn_only, plan_columns, plan_metrics


def _sort_value(value: str | None, value_type: str) -> tuple[int, int | str]:
    if value is None:
        return (0, 0)
    if value_type == "integer":
        return (1, int(value))
    return (1, value)


def merge_bounds(bounds: Sequence[PartitionBounds]) -> tuple[PartitionBounds, ...]:
    """The same rows as the union of ``bounds`` in as few, deterministically ordered, bounds as possible.

    A whole-table partition absorbs everything (the union is the table).
    """
    if not bounds:
        raise DponeError(ErrorCode.USAGE, "a generation needs at least one partition")
    whole = next((b for b in bounds if b.kind is BoundsKind.ALL), None)
    if whole is not None:
        return (whole,)
    ranges: dict[tuple[str, str], list[PartitionBounds]] = {}
    values: dict[tuple[str, str], set[str]] = {}
    for one in bounds:
        key = (one.column or "", one.value_type)
        if one.kind is BoundsKind.RANGE:
            ranges.setdefault(key, []).append(one)
        else:
            values.setdefault(key, set()).update(one.values or ())
    merged: list[PartitionBounds] = []
    for (column, value_type), group in sorted(ranges.items(), key=lambda item: item[0]):
        group.sort(key=lambda b: (_sort_value(b.lower, value_type), _sort_value(b.upper, value_type)))
        current = group[0]
        for nxt in group[1:]:
            if current.upper is not None and nxt.lower is not None and current.upper == nxt.lower:
                current = _range(column, value_type, current.lower, nxt.upper)
            else:
                merged.append(_relabel(current))
                current = nxt
        merged.append(_relabel(current))
    for (column, value_type), found in sorted(values.items(), key=lambda item: item[0]):
        ordered = sorted(found, key=lambda v: _sort_value(v, value_type))
        for start in range(0, len(ordered), MAX_SELECTOR_PARTITIONS):
            chunk = tuple(ordered[start : start + MAX_SELECTOR_PARTITIONS])
            merged.append(
                PartitionBounds(
                    kind=BoundsKind.VALUES,
                    column=column,
                    values=chunk,
                    value_type=value_type,
                    label=f"{column} in {len(chunk)} values",
                )
            )
    return tuple(merged)


def compact_bounds(bounds: Sequence[PartitionBounds]) -> tuple[PartitionBounds, ...]:
    """:func:`merge_bounds` for a reader selector: partitioned, and within the selector's limits.

    Raises ``usage_error`` for the whole table (``all`` bounds): without a load-ID column a selector cannot
    tell this operation's rows from anyone else's, so durable replay needs a partitioned route.
    """
    merged = merge_bounds(bounds)
    if any(b.kind is BoundsKind.ALL for b in merged):
        raise DponeError(
            ErrorCode.USAGE,
            "durable quality replay needs a partitioned route: an unpartitioned generation cannot be "
            "selected apart from other rows of the target table",
            details={"path": "source.partitioning"},
        )
    if len(merged) > MAX_SELECTOR_PARTITIONS:
        raise DponeError(
            ErrorCode.CAPSULE_CAPACITY_EXCEEDED,
            f"the batch's generation needs {len(merged)} separate ranges; a reader plan holds at most "
            f"{MAX_SELECTOR_PARTITIONS}. Nothing was extracted; load fewer partitions per run",
            details={"ranges": len(merged), "limit": MAX_SELECTOR_PARTITIONS},
        )
    return merged


def _range(column: str, value_type: str, lower: str | None, upper: str | None) -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column=column,
        lower=lower,
        upper=upper,
        value_type=value_type,
        label=f"{column} [{lower or ''},{upper or ''})",
    )


def _relabel(bounds: PartitionBounds) -> PartitionBounds:
    """A fixed label (a manifest's label text must not change the generation key)."""
    return _range(bounds.column or "", bounds.value_type, bounds.lower, bounds.upper)


def target_plan(
    target_table: str, bounds: Sequence[PartitionBounds], policy: QualityPolicy
) -> TargetReadRequest:
    """The reader's plan for the generation of ``bounds`` under ``policy``."""
    selector_bounds = compact_bounds(bounds)
    try:
        return TargetReadRequest(
            target_table=target_table,
            selector=GenerationSelector(partitions=selector_bounds),
            columns=plan_columns(policy),
            metrics=plan_metrics(policy),
            allow_unavailable=all_warn_only(policy.checks),
        )
    except ValidationError as exc:
        raise DponeError(
            ErrorCode.USAGE,
            "the batch's generation or quality columns cannot be expressed as a bounded reader plan "
            "(plain identifiers, canonical bound values, at most 256 columns)",
            details={"target_table": target_table},
        ) from exc
