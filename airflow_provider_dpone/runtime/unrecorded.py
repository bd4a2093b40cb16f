"""Rows in a ``replace_partition`` route's lookback window that no checkpoint records.

A route whose checkpoint store was restored from an older backup (or copied to another worker) does not know
the commits made since. The partitions the source still plans run again and replace their rows; one the
source has emptied since is planned by nothing, and the deleted-partition check (``vanished``) knows only
recorded commits: its rows stayed in the target for good, exit 0 (seen: the newest day deleted in the source
after the store's backup, 15 rows in the source and 18 in the target; a day moved to the next one, its rows
twice). So, from the oldest partition the lookback reaches on, the stretches no planned partition and no
recorded commit covers are counted on the target, and the units of the current partitioning holding rows
there are found by halving (``locate``): a few counts for a week's window, ``2 log2(span)`` per unit found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

#: One stretch of unit indexes ``[start, end)``; ``end`` None: open-ended (past the newest known partition).
Stretch = tuple[int, int | None]


@dataclass(frozen=True)
class Units:
    """The current partitioning's units as consecutive integers (days by ordinal, months by ``12y + m``,
    integer ranges by ``start // size``), spelled back as the planner spells them (``template``)."""

    partitioning: Partitioning
    template: PartitionBounds

    def index_of(self, value: str) -> int:
        """The unit holding ``value`` (a bound of the same value type)."""
        kind = self.partitioning.kind
        if kind is PartitionKind.DAY:
            return date.fromisoformat(value).toordinal()
        if kind is PartitionKind.MONTH:
            day = date.fromisoformat(value)
            return day.year * 12 + day.month - 1
        return int(value) // self._size()

    def end_of(self, upper: str) -> int:
        """The first unit wholly at or past an exclusive upper bound (a partly covered unit counts as covered:
        its rows are some recorded commit's too, and counting it would take them for unrecorded ones)."""
        kind = self.partitioning.kind
        if kind is PartitionKind.DAY:
            return date.fromisoformat(upper).toordinal()
        if kind is PartitionKind.MONTH:
            day = date.fromisoformat(upper)
            return day.year * 12 + day.month - 1 + (1 if day.day > 1 else 0)
        return -(-int(upper) // self._size())

    def lower_of(self, index: int) -> str:
        """The lower bound of unit ``index`` (ValueError or OverflowError past the calendar's end)."""
        kind = self.partitioning.kind
        if kind is PartitionKind.DAY:
            return date.fromordinal(index).isoformat()
        if kind is PartitionKind.MONTH:
            return date(index // 12, index % 12 + 1, 1).isoformat()
        return str(index * self._size())

    def region(self, start: int, end: int | None) -> PartitionBounds:
        """The bounds of units ``[start, end)`` (open-ended for ``end`` None)."""
        lower = self.lower_of(start)
        upper = None if end is None else self.lower_of(end)
        return self.template.model_copy(
            update={"lower": lower, "upper": upper, "label": f"{self.template.column}>={lower}"}
        )

    def unit(self, index: int) -> PartitionBounds:
        """Unit ``index``'s bounds exactly as the planner spells them (``partition_planning``)."""
        lower, upper = self.lower_of(index), self.lower_of(index + 1)
        column = self.template.column
        kind = self.partitioning.kind
        if kind is PartitionKind.DAY:
            label = f"{column}={lower}"
        elif kind is PartitionKind.MONTH:
            label = f"{column}={lower[:7]}"
        else:
            label = f"{column}=[{lower},{upper})"
        return self.template.model_copy(update={"lower": lower, "upper": upper, "label": label})

    def _size(self) -> int:
        return self.partitioning.size or 1


def units_of(partitioning: Partitioning, template: PartitionBounds) -> Units | None:
    """The unit arithmetic of a day, month or integer-range partitioning (None for a list, or bounds not of
    the shape the planner makes)."""
    if template.kind is not BoundsKind.RANGE or template.column is None:
        return None
    if partitioning.kind in (PartitionKind.DAY, PartitionKind.MONTH) and template.value_type == "date":
        return Units(partitioning, template)
    if partitioning.kind is PartitionKind.INTEGER_RANGE and template.value_type == "integer":
        return Units(partitioning, template)
    return None


def comparable(bounds: PartitionBounds, template: PartitionBounds) -> bool:
    """A range on the same column and value type as the current partitioning's, with both sides."""
    return (
        bounds.kind is BoundsKind.RANGE
        and bounds.column is not None
        and template.column is not None
        and bounds.column.casefold() == template.column.casefold()
        and bounds.value_type == template.value_type
        and bounds.lower is not None
        and bounds.upper is not None
    )


def unrecorded_stretches(units: Units, floor: str, recorded: Sequence[PartitionBounds]) -> list[Stretch]:
    """The stretches of units from the one holding ``floor`` on that none of ``recorded`` (planned
    partitions, recorded commits; ``comparable`` ones only) covers, oldest first; the last is open-ended."""
    covered = sorted(
        (units.index_of(b.lower), units.end_of(b.upper))
        for b in recorded
        if b.lower is not None and b.upper is not None
    )
    cursor = units.index_of(floor)
    stretches: list[Stretch] = []
    for start, end in covered:
        if end <= cursor:
            continue
        if start > cursor:
            stretches.append((cursor, start))
        cursor = end
    stretches.append((cursor, None))
    return stretches


@dataclass
class Located:
    """What ``locate`` found: units holding rows (with their counts), newest first, and whether it stopped
    early (the count budget spent, or rows past the calendar's end): rows may remain that were not found."""

    units: list[tuple[PartitionBounds, int]]
    incomplete: bool = False


def locate(
    units: Units, stretches: Sequence[Stretch], count: Callable[[PartitionBounds], int], budget: int
) -> Located:
    """The units within ``stretches`` that hold rows by ``count``, newest first, in at most ``budget``
    counts: each stretch is counted once; one holding rows is halved until single units are left (an
    open-ended one is first closed by doubling its span until it holds all its rows). Both halves are
    counted: ``count`` need not add up (a fan-in's share of other sources may be known for one part only)."""
    found = Located([])
    spent = 0

    def counted(start: int, end: int | None) -> int | None:
        nonlocal spent
        if spent >= budget:
            found.incomplete = True
            return None
        spent += 1
        try:
            return count(units.region(start, end))
        except (ValueError, OverflowError):  # past the calendar's end: cannot be written as bounds
            found.incomplete = True
            return None

    def halve(start: int, end: int) -> None:  # holds rows; more than one unit
        middle = (start + end) // 2
        for low, high in ((middle, end), (start, middle)):  # the newer half first
            held = counted(low, high)
            if held is None:
                return
            if held and high - low > 1:
                halve(low, high)
            elif held:
                found.units.append((units.unit(low), held))

    for start, end in reversed(stretches):
        held = counted(start, end)
        if held is None:
            break
        if not held:
            continue
        if end is None:
            span = 1
            while True:
                within = counted(start, start + span)
                if within is None:
                    return found
                if within >= held:
                    break
                span *= 2
            end = start + span
        if end - start == 1:
            found.units.append((units.unit(start), held))
        else:
            halve(start, end)
        if found.incomplete:
            break
    return found
