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

Who ran ahead (``records_ahead``): once one worker's clock ran ahead, every later record is timed one tick
after the newest one read, so the newest record is always the last run's, whatever its worker's clock (seen:
the notice named a correct worker's run as the one to fix). A record one tick after another record was
floored; the runs that wrote a time ahead without one are the ones whose clocks ran ahead.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

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

    def monotonic(self) -> float:
        return self._inner.monotonic()


def worker_now(clock: Clock) -> datetime:
    """``clock``'s own time, for deciding what has settled or begun: a ``CausalClock``'s unfloored time."""
    return clock.wall_now() if isinstance(clock, CausalClock) else clock.now()


class RecordsAhead(NamedTuple):
    """Records timed more than a margin ahead of a worker's clock, and which runs wrote them how."""

    #: the newest record time among the latest records, and its lead over the worker's clock
    newest: datetime
    lead: timedelta
    #: runs that wrote a time of their own ahead (their worker's clock ran ahead), with the first such time,
    #: earliest first
    ran_ahead: tuple[tuple[str, datetime], ...]
    #: runs whose every record ahead is one tick after an earlier record: floored, their clocks not in question
    followed: tuple[str, ...]


def records_ahead(
    latest: Iterable[PartitionCheckpoint],
    earlier: Iterable[PartitionCheckpoint],
    now: datetime,
    margin: timedelta,
) -> RecordsAhead | None:
    """The records among ``latest`` (and ``earlier``: records they replaced) timed more than ``margin`` after
    ``now`` (the worker's own time), split into the runs that wrote their own time ahead and those that only
    followed the floor (one tick after a record they read); None when no latest record is that far ahead.

    The newest record is always the last run's, so it never tells who ran ahead; ``earlier`` holds the
    records a later run replaced (a lookback runs the same days again), which may be the first ones ahead."""
    latest = list(latest)
    records = [*latest, *earlier]
    newest = max((checkpoint_moment(c) for c in latest), default=None)
    if newest is None or newest - now <= margin:
        return None
    times = {checkpoint_moment(c) for c in records}
    own: dict[str, datetime] = {}
    floored: dict[str, datetime] = {}
    for record in sorted(records, key=checkpoint_moment):
        moment = checkpoint_moment(record)
        if moment - now <= margin:
            continue
        (floored if moment - _TICK in times else own).setdefault(record.run_id, moment)
    return RecordsAhead(
        newest=newest,
        lead=newest - now,
        ran_ahead=tuple(own.items()),
        followed=tuple(run for run in floored if run not in own),
    )
