"""Whether two partitions can select the same rows, and whether some partitions select all of another's.

Used when a route's identity changed (query, schema or partitioning): partitions committed under the old
identity hold rows in the target, so a new partition that selects any of those rows must not be appended
on a guess. Every answer errs toward "they may overlap" and "not covered": different columns, value types
that do not compare, or bounds this module cannot read overlap everything and cover nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import date, datetime

from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

#: A bound's value in an order every bound of one column shares: integers, or datetimes (a date is its midnight).
_Key = tuple[int, object]


class _Incomparable(Exception):
    """Two bounds cannot be ordered against each other (another column, or value types that differ)."""


def collation_folded(text: str) -> str:
    """A text value as a source's usual collation may match it: case and trailing spaces ignored (SQL Server
    compares ``'EU'``, ``'eu'`` and ``'EU  '`` equal; a ``char(n)`` column hands values back padded)."""
    return text.rstrip(" ").casefold()


def _key(text: str, value_type: str, *, folded: bool = True) -> _Key:
    """``folded``: text compared as a collation may (for overlap); else byte for byte, as the target
    compares (for coverage: the target's delete and count select by the exact spelling)."""
    try:
        if value_type == "integer":
            return (0, int(text))
        if value_type == "date":
            day = date.fromisoformat(text)
            return (1, datetime(day.year, day.month, day.day))
        if value_type == "datetime":
            moment = datetime.fromisoformat(text)
            if moment.tzinfo is not None:
                raise _Incomparable
            return (1, moment)
        return (2, collation_folded(text) if folded else text)
    except ValueError:
        raise _Incomparable from None


def _same_column(a: PartitionBounds, b: PartitionBounds) -> bool:
    return (a.column or "").casefold() == (b.column or "").casefold()


def _interval(bounds: PartitionBounds, *, folded: bool = True) -> tuple[_Key | None, _Key | None]:
    """``[lower, upper)`` of a range; ``None`` is unbounded on that side."""
    lower = _key(bounds.lower, bounds.value_type, folded=folded) if bounds.lower is not None else None
    upper = _key(bounds.upper, bounds.value_type, folded=folded) if bounds.upper is not None else None
    return lower, upper


def _points(bounds: PartitionBounds, *, folded: bool = True) -> list[_Key]:
    return [_key(value, bounds.value_type, folded=folded) for value in bounds.values or ()]


def _within(point: _Key, lower: _Key | None, upper: _Key | None) -> bool:
    return (lower is None or _lt_eq(lower, point)) and (upper is None or _lt(point, upper))


def _lt(a: _Key, b: _Key) -> bool:
    if a[0] != b[0]:
        raise _Incomparable
    return bool(a[1] < b[1])  # type: ignore[operator]


def _lt_eq(a: _Key, b: _Key) -> bool:
    return not _lt(b, a)


def may_overlap(a: PartitionBounds, b: PartitionBounds) -> bool:
    """True unless the two bounds provably select disjoint rows."""
    if BoundsKind.ALL in (a.kind, b.kind) or not _same_column(a, b):
        return True
    try:
        if a.kind is BoundsKind.RANGE and b.kind is BoundsKind.RANGE:
            (la, ua), (lb, ub) = _interval(a), _interval(b)
            starts_before_b_ends = la is None or ub is None or _lt(la, ub)
            starts_before_a_ends = lb is None or ua is None or _lt(lb, ua)
            return starts_before_b_ends and starts_before_a_ends
        if a.kind is BoundsKind.VALUES and b.kind is BoundsKind.VALUES:
            return bool(set(_points(a)) & set(_points(b)))
        ranged, listed = (a, b) if a.kind is BoundsKind.RANGE else (b, a)
        lower, upper = _interval(ranged)
        return any(_within(point, lower, upper) for point in _points(listed))
    except _Incomparable:
        return True


def fully_covered(bounds: PartitionBounds, by: Sequence[PartitionBounds]) -> bool:
    """True only when the union of ``by`` provably selects every row ``bounds`` selects."""
    if any(other.kind is BoundsKind.ALL for other in by):
        return True
    if bounds.kind is BoundsKind.ALL:
        return False
    same = [other for other in by if _same_column(bounds, other)]
    try:  # text byte for byte: what ``by``'s deletes and counts select in the target
        if bounds.kind is BoundsKind.VALUES:
            return all(_point_covered(point, same) for point in _points(bounds, folded=False))
        lower, upper = _interval(bounds, folded=False)
        return _range_covered(
            lower, upper, [_interval(o, folded=False) for o in same if o.kind is BoundsKind.RANGE]
        )
    except _Incomparable:
        return False


def _point_covered(point: _Key, by: Sequence[PartitionBounds]) -> bool:
    for other in by:
        if other.kind is BoundsKind.VALUES and point in _points(other, folded=False):
            return True
        if other.kind is BoundsKind.RANGE and _within(point, *_interval(other, folded=False)):
            return True
    return False


def _range_covered(
    lower: _Key | None, upper: _Key | None, intervals: Sequence[tuple[_Key | None, _Key | None]]
) -> bool:
    """Walk ``[lower, upper)`` left to right through intervals that start at or before the walked point."""
    reached = lower
    pending = list(intervals)
    while True:
        if reached is not None and upper is not None and _lt_eq(upper, reached):
            return True
        step = None
        for start, end in pending:
            starts_in_time = start is None or (reached is not None and _lt_eq(start, reached))
            if not starts_in_time:
                continue
            if end is None:
                return True  # unbounded above: everything from here on is covered
            if reached is None or _lt(reached, end):
                step = end if step is None or _lt(step, end) else step
        if step is None:
            return False
        reached = step


def pairwise_disjoint(bounds: Sequence[PartitionBounds]) -> bool:
    """True only when no two of ``bounds`` may select the same row: closed ranges of one column, sorted by
    their lower bound, each starting no earlier than the one before it ends. Anything else: False (the
    caller compares them pair by pair)."""
    if len(bounds) < 2:
        return True
    first = bounds[0]
    keyed: list[tuple[_Key, _Key]] = []
    try:
        for one in bounds:
            if one.kind is not BoundsKind.RANGE or not _same_column(one, first):
                return False
            lower, upper = _interval(one)
            if lower is None or upper is None:
                return False
            keyed.append((lower, upper))
        keyed.sort(key=lambda pair: pair[0])
        return all(not _lt(later[0], earlier[1]) for earlier, later in itertools.pairwise(keyed))
    except (_Incomparable, TypeError):
        return False
