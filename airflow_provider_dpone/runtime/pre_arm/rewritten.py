"""Pairs of commits where one route rewrote rows another had committed, found by overlapping ranges."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.runtime.bounds_coverage import may_overlap
from airflow_provider_dpone.runtime.route_family import RouteFamily, replaced_the_target


def rewritten_since(
    family: RouteFamily, committed: Sequence[PartitionCheckpoint]
) -> list[tuple[PartitionCheckpoint, PartitionCheckpoint]]:
    """(committed partition, other route's checkpoint) where another route of the target that replaces
    rows began an attempt within the partition's bounds after the partition was committed: its delete ran
    (or may have), and an append route skips its own committed partitions for ever. The run counts these
    partitions in the target (only these: a mix of strategies on one table is rare) and stops on one that
    holds fewer rows than it loaded; a replace that put every row back passes. Seen: a
    ``replace_partition`` run of one day failed after its delete, was resolved ``not-applied``, and the
    append route then reported "nothing to do", exit 0, with the day's rows missing (a notice blamed
    retention); a ``full_refresh`` with a filtering query did the same to every day it left out."""
    own = {family.route, *family.legacy_routes()}
    # the strategy first: an append route's tens of thousands of checkpoints cost one comparison each
    replacing = [
        c
        for c in family.target_wide
        if c.route.strategy is not Strategy.INCREMENTAL_APPEND
        and c.route not in own
        and replaced_the_target(c)
    ]
    if not replacing:
        return []
    # the newest replacing attempt per exact bounds (a sibling partitioned alike: one lookup per partition),
    # the newest full refresh, and the rest compared one by one (another partitioning: rare and few)
    newest_on: dict[PartitionBounds, PartitionCheckpoint] = {}
    refreshed_on: dict[PartitionBounds, PartitionCheckpoint] = {}
    refresh: PartitionCheckpoint | None = None
    for other in replacing:
        # a full refresh empties the whole table, whatever its bounds; its checkpoint of the same bounds
        # says what it loaded there (all of one run's share one start: the newest is not one of them)
        index = refreshed_on if other.route.strategy is Strategy.FULL_REFRESH else newest_on
        known = index.get(other.bounds)
        if known is None or other.started_at > known.started_at:
            index[other.bounds] = other
        if other.route.strategy is Strategy.FULL_REFRESH and (
            refresh is None or other.started_at > refresh.started_at
        ):
            refresh = other
    others = RangeIndex(list(newest_on.values()))  # any of them may overlap bounds other than its own
    found: list[tuple[PartitionCheckpoint, PartitionCheckpoint]] = []
    for checkpoint in committed:
        since = checkpoint.completed_at or checkpoint.started_at
        same = newest_on.get(checkpoint.bounds)
        whole = refreshed_on.get(checkpoint.bounds)
        if whole is None or (refresh is not None and whole.started_at < refresh.started_at):
            whole = refresh
        hit = next(
            (
                c
                for c in (whole, same, *others.overlapping(checkpoint.bounds))
                if c is not None
                and c.started_at > since
                and (c is whole or c is same or may_overlap(checkpoint.bounds, c.bounds))
            ),
            None,
        )
        if hit is not None:
            found.append((checkpoint, hit))
    return found


def _range_key(value: str | None, value_type: str) -> object | None:
    """A closed range bound as a value that orders as the target compares it (None: not indexable)."""
    if value is None:
        return None
    try:
        if value_type == "integer":
            return int(value)
        if value_type == "date":
            return date.fromisoformat(value[:10]) if len(value) == 10 else None
        if value_type == "datetime":
            moment = datetime.fromisoformat(value)
            return None if moment.tzinfo is not None else moment
    except ValueError:
        return None
    return None


class RangeIndex:
    """Checkpoints whose bounds may overlap a given range, without comparing every pair: closed ranges
    of one column and value type sorted by their lower bound (a candidate starts below the range's upper
    bound and no earlier than its lower bound less the widest range); anything else is always a candidate.
    A strategy switched back and forth over years of days would otherwise compare millions of pairs."""

    def __init__(self, checkpoints: Sequence[PartitionCheckpoint]) -> None:
        self._always: list[PartitionCheckpoint] = []
        grouped: dict[tuple[str | None, str], list[tuple[Any, Any, PartitionCheckpoint]]] = {}
        for c in checkpoints:
            low = _range_key(c.bounds.lower, c.bounds.value_type)
            high = _range_key(c.bounds.upper, c.bounds.value_type)
            if c.bounds.kind is not BoundsKind.RANGE or low is None or high is None:
                self._always.append(c)
                continue
            grouped.setdefault((c.bounds.column, c.bounds.value_type), []).append((low, high, c))
        self._groups: dict[tuple[str | None, str], tuple[list[Any], list[PartitionCheckpoint], Any]] = {}
        for key, items in grouped.items():
            items.sort(key=lambda item: item[0])
            widest = max(high - low for low, high, _ in items)
            self._groups[key] = ([low for low, _, _ in items], [c for _, _, c in items], widest)

    def overlapping(self, bounds: PartitionBounds) -> list[PartitionCheckpoint]:
        low = _range_key(bounds.lower, bounds.value_type)
        high = _range_key(bounds.upper, bounds.value_type)
        if bounds.kind is not BoundsKind.RANGE or low is None or high is None:
            return [*self._always, *(c for _, cs, _ in self._groups.values() for c in cs)]
        candidates = list(self._always)
        for (column, value_type), (lows, checkpoints, widest) in self._groups.items():
            if (column, value_type) != (bounds.column, bounds.value_type):
                candidates.extend(checkpoints)  # another column or type: may_overlap decides
                continue
            start = bisect_left(lows, low - widest)
            candidates.extend(checkpoints[start : bisect_left(lows, high)])
        return candidates
