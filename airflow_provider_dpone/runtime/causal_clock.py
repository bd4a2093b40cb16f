"""Record times that follow every record a process has read, whatever the worker's clock says.

Records of one target are ordered by their times (``checkpoint_moment``): which definition committed a
partition last (``rerun_superseded``), which commit a count belongs to, which late day followed the newest.
Runs of one target take turns under its lease, but on different workers, and a worker whose clock ran
behind the one before wrote records that looked older than what it had just read (seen: 120 s behind, a
reverted manifest skipped days the other definition had replaced since). So a process's clock, once it has
read a target's records, never gives a time before the newest of them: a Lamport clock over the store.

That floor orders records; it never decides what has settled, begun or may still fill (``worker_now``). A
worker whose clock ran days ahead left records days in the future, and every later worker floored to them
took a still-filling day as settled (``settle``: its late rows never moved, exit 0) and a day not begun as
the lookback's newest (today's day never moved again). Read on the worker's own clock, a decision can only
hold a day back, which loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint, checkpoint_moment
from airflow_provider_dpone.ports.clock import Clock

#: How far past the newest record read a lagging clock's time is put (the store keeps microseconds).
_TICK = timedelta(microseconds=1)


class CausalClock:
    """``inner``'s time, but never at or before the newest record time ``after`` was given."""

    def __init__(self, inner: Clock) -> None:
        self._inner = inner
        self._floor: datetime | None = None

    @classmethod
    def over(cls, clock: Clock) -> CausalClock:
        """``clock`` itself when it already is one (a composition root shares it with its engine)."""
        return clock if isinstance(clock, CausalClock) else cls(clock)

    def after(self, records: Iterable[PartitionCheckpoint]) -> None:
        """Every later ``now`` is after each of ``records``' times."""
        newest = max((checkpoint_moment(c) for c in records), default=None)
        if newest is not None and (self._floor is None or newest > self._floor):
            self._floor = newest

    def now(self) -> datetime:
        """The time a record is written with: the worker's, or just after the newest record read."""
        now = self._inner.now()
        floor = self._floor
        return now if floor is None or now > floor else floor + _TICK

    def wall_now(self) -> datetime:
        """The worker's own time, never floored: what has settled, begun or may still fill is decided by it."""
        return self._inner.now()

    def floor_lead(self) -> tuple[datetime, timedelta] | None:
        """The newest record time read and how far it is ahead of the worker's clock; None when it is not."""
        floor = self._floor
        if floor is None:
            return None
        lead = floor - self._inner.now()
        return (floor, lead) if lead > timedelta(0) else None

    def monotonic(self) -> float:
        return self._inner.monotonic()


def worker_now(clock: Clock) -> datetime:
    """``clock``'s own time, for deciding what has settled or begun: a ``CausalClock``'s unfloored time."""
    return clock.wall_now() if isinstance(clock, CausalClock) else clock.now()
