"""Whether two partitions can select the same rows, and whether some partitions select all of another's.

Used when a route's identity changed (query, schema or partitioning): partitions committed under the old
identity hold rows in the target, so a new partition that selects any of those rows must not be appended
on a guess. Every answer errs toward "they may overlap" and "not covered": different columns, value types
that do not compare, or bounds this module cannot read overlap everything and cover nothing.
"""

from __future__ import annotations

import itertools
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from datetime import date, datetime
from typing import Any

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


#: A bound as a key every bound of one column and value family orders by: ``(0,)`` below every value (no
#: lower bound), ``(1, value)``, ``(1, value, 1)`` just above a listed value, ``(2,)`` above every value.
_Edge = tuple[object, ...]
_BELOW: _Edge = (0,)
_ABOVE: _Edge = (2,)


def _family(value_type: str) -> int:
    """The first element of :func:`_key` for a value type: keys of two families never compare."""
    return {"integer": 0, "date": 1, "datetime": 1}.get(value_type, 2)


class _Read:
    """One bounds as :func:`may_overlap` reads them, read once: ``kind`` None when they cannot be read
    (they overlap everything); a listed value is the degenerate range ``[value, value + epsilon)``."""

    __slots__ = ("column", "family", "kind", "spans")

    def __init__(self, bounds: PartitionBounds) -> None:
        self.column = (bounds.column or "").casefold()
        self.family = _family(bounds.value_type)
        self.kind: BoundsKind | None = bounds.kind
        self.spans: list[tuple[_Edge, _Edge]] = []
        try:
            if bounds.kind is BoundsKind.RANGE:
                lower, upper = _interval(bounds)
                self.spans.append(
                    (_BELOW if lower is None else (1, lower[1]), _ABOVE if upper is None else (1, upper[1]))
                )
            elif bounds.kind is BoundsKind.VALUES:
                self.spans.extend(((1, point[1]), (1, point[1], 1)) for point in _points(bounds))
        except _Incomparable:
            self.kind = None


class _Chain:
    """Spans that, sorted by start, also end in order (the usual partitioning: disjoint days, months, or
    listed values): those overlapping ``[start, end)`` are one run of them (ending above ``start``,
    starting below ``end``), whose smallest position a sparse table gives at once. O(n log n) to build in
    C-level passes."""

    def __init__(self, starts: list[_Edge], ends: list[_Edge], positions: list[int]) -> None:
        self._starts, self._ends, self._positions = starts, ends, positions
        self._least = [positions]  # row k: the smallest position of each run of 2**k spans
        width = 1
        while 2 * width <= len(positions):
            shorter = self._least[-1]
            self._least.append(list(map(min, shorter, shorter[width:])))
            width *= 2

    def least(self, start: _Edge, end: _Edge) -> int | None:
        """The smallest position of a span overlapping ``[start, end)``."""
        low, high = bisect_right(self._ends, start), bisect_left(self._starts, end)
        if low >= high:
            return None
        level = (high - low).bit_length() - 1
        row = self._least[level]
        return min(row[low], row[high - (1 << level)])

    def every(self, start: _Edge, end: _Edge) -> Iterator[int]:
        """The positions of the spans overlapping ``[start, end)`` (a listed value's once per value)."""
        return iter(self._positions[bisect_right(self._ends, start) : bisect_left(self._starts, end)])


class _Nested:
    """Spans of any shape (a month over its days, ranges open on a side): a segment tree over them sorted by
    start, each node holding its spans sorted by end with the smallest position of every suffix (a node's
    spans ending above an edge are a suffix). O(n log n) to build, O(log^2 n) to ask."""

    def __init__(self, spans: list[tuple[_Edge, _Edge, int]]) -> None:
        self._starts = [start for start, _, _ in spans]
        size = 1
        while size < len(spans):
            size *= 2
        self._size = size
        nodes: list[list[tuple[_Edge, int]]] = [[] for _ in range(2 * size)]
        for i, (_, end, position) in enumerate(spans):
            nodes[size + i] = [(end, position)]
        for node in range(size - 1, 0, -1):
            nodes[node] = sorted(nodes[2 * node] + nodes[2 * node + 1])
        self._ends = [[end for end, _ in node] for node in nodes]
        self._positions = [[position for _, position in node] for node in nodes]
        self._least: list[list[int]] = []
        for positions in self._positions:
            least = list(itertools.accumulate(reversed(positions), min))
            least.reverse()
            self._least.append(least)

    def _nodes(self, start: _Edge, end: _Edge) -> Iterator[tuple[int, int]]:
        """(node, index of its first span ending above ``start``) of the nodes that together hold the spans
        starting below ``end``: those overlap ``[start, end)``."""
        low, high = self._size, self._size + bisect_left(self._starts, end)
        while low < high:
            if low & 1:
                yield low, bisect_right(self._ends[low], start)
                low += 1
            if high & 1:
                high -= 1
                yield high, bisect_right(self._ends[high], start)
            low >>= 1
            high >>= 1

    def least(self, start: _Edge, end: _Edge) -> int | None:
        """The smallest position of a span overlapping ``[start, end)``."""
        found = [self._least[node][i] for node, i in self._nodes(start, end) if i < len(self._least[node])]
        return min(found) if found else None

    def every(self, start: _Edge, end: _Edge) -> Iterator[int]:
        """The positions of the spans overlapping ``[start, end)`` (a listed value's once per value)."""
        for node, i in self._nodes(start, end):
            yield from self._positions[node][i:]


def _spans_of(spans: list[tuple[_Edge, _Edge, int]]) -> _Chain | _Nested:
    """Spans sorted by start (then end), asked as a chain where their ends are in order too."""
    spans.sort()
    ends = [end for _, end, _ in spans]
    if all(map(operator.le, ends, ends[1:])):
        return _Chain([start for start, _, _ in spans], ends, [position for _, _, position in spans])
    return _Nested(spans)


class _Column:
    """The bounds of one partition column (case ignored), by value family."""

    def __init__(self) -> None:
        self.positions: list[int] = []
        self.spans: dict[int, list[tuple[_Edge, _Edge, int]]] = {}
        self.ranges: dict[int, list[int]] = {}  # positions of ranges: they overlap any other family's bounds
        self.listed: dict[int, list[int]] = {}  # of listed values (some): they overlap other families' ranges
        self._trees: dict[int, _Chain | _Nested] = {}

    def add(self, read: _Read, position: int) -> None:
        self.positions.append(position)
        if read.kind is BoundsKind.RANGE:
            self.ranges.setdefault(read.family, []).append(position)
        elif read.spans:
            self.listed.setdefault(read.family, []).append(position)
        else:
            return  # no value listed: overlaps nothing of its column
        self.spans.setdefault(read.family, []).extend((start, end, position) for start, end in read.spans)

    def tree(self, family: int) -> _Chain | _Nested | None:
        if family not in self.spans:
            return None
        if family not in self._trees:
            self._trees[family] = _spans_of(self.spans[family])
        return self._trees[family]


class OverlapIndex:
    """Which of many bounds :func:`may_overlap` a given one, without comparing every pair: the same answers,
    each bound read once (``may_overlap`` reads both anew on every call: 1,000 bounds against 10,000 took a
    minute). Positions are those of the sequence given; ``first`` answers "any older one?" when it is
    ordered by time. Built lazily per column and value family: O(n log n) (:class:`_Chain`, O(log n) to
    ask per range or listed value) or, for nested spans, O(n log n) lists (:class:`_Nested`, O(log^2 n));
    plus the answers listed."""

    def __init__(self, bounds: Sequence[PartitionBounds]) -> None:
        self._count = len(bounds)
        self._everywhere: list[int] = []  # the whole table, or bounds that cannot be read
        self._columns: dict[str, _Column] = {}
        for position, one in enumerate(bounds):
            read = _Read(one)
            if read.kind is None or read.kind is BoundsKind.ALL:
                self._everywhere.append(position)
            else:
                self._columns.setdefault(read.column, _Column()).add(read, position)

    def __len__(self) -> int:
        return self._count

    def first(self, bounds: PartitionBounds) -> int | None:
        """The smallest position of a bound that may overlap ``bounds`` (None: none may)."""
        read = _Read(bounds)
        if read.kind is None or read.kind is BoundsKind.ALL:
            return 0 if self._count else None
        found = [positions[0] for positions in self._plain(read) if positions]
        found.extend(least for least in self._spanned(read, first=True) if least is not None)
        return min(found) if found else None

    def overlapping(self, bounds: PartitionBounds) -> list[int]:
        """The positions of every bound that may overlap ``bounds``, ascending."""
        read = _Read(bounds)
        if read.kind is None or read.kind is BoundsKind.ALL:
            return list(range(self._count))
        found: set[int] = set()
        for positions in self._plain(read):
            found.update(positions)
        for positions in self._spanned(read, first=False):
            found.update(positions)
        return sorted(found)

    def _plain(self, read: _Read) -> Iterator[Sequence[int]]:
        """Whole lists that overlap ``read``: the whole table and unreadable bounds, other columns', and in
        its own column another value family's ranges (against a range or listed values) and listed values
        (against a range)."""
        yield self._everywhere
        for column, held in self._columns.items():
            if column != read.column:
                yield held.positions
                continue
            if not read.spans:
                continue  # listing no value: overlaps nothing of its column
            for family, positions in held.ranges.items():
                if family != read.family:
                    yield positions
            if read.kind is BoundsKind.RANGE:
                for family, positions in held.listed.items():
                    if family != read.family:
                        yield positions

    def _spanned(self, read: _Read, *, first: bool) -> Iterator[Any]:
        """Per span of ``read``, its own column and family's spans overlapping it: the least position, or all.
        Two spans overlap when each starts below the other's end; a listed value's span ends just above it,
        so it overlaps a range that holds it and an equal listed value only."""
        held = self._columns.get(read.column)
        tree = held.tree(read.family) if held is not None else None
        if tree is None:
            return
        for start, end in read.spans:
            yield tree.least(start, end) if first else tree.every(start, end)
