"""Record times that follow every record a process has read, whatever the worker's clock says.

Records of one target are ordered by their times (``checkpoint_moment``): which definition committed a
partition last (``rerun_superseded``), which commit a count belongs to, which late day followed the newest.
Runs of one target take turns under its lease, but on different workers, and a worker whose clock ran
behind the one before wrote records that looked older than what it had just read (seen: 120 s behind, a
reverted manifest skipped days the other definition had replaced since). So a process's clock, once it has
read a target's records, never gives a time before the newest of them: a Lamport clock over the store.
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
        now = self._inner.now()
        floor = self._floor
        return now if floor is None or now > floor else floor + _TICK

    def monotonic(self) -> float:
        return self._inner.monotonic()
