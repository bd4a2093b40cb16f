"""Record times follow every record a run has read, whatever the worker's clock says (``CausalClock``).

Red before: a worker whose clock ran 120 s behind the one before wrote records that looked older than
those it had just read, and every rule ordering records by time (which definition committed last, which
commit followed the newest) read the history backwards.
"""

from __future__ import annotations

import datetime as dt

from airflow_provider_dpone.contracts.checkpoint import checkpoint_moment
from airflow_provider_dpone.runtime.causal_clock import CausalClock
from tests.doubles import (
    FixedClock,
    InMemoryCheckpointStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
)

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


def test_a_clock_behind_the_newest_record_read_gives_a_time_just_after_it() -> None:
    store = InMemoryCheckpointStore()
    transfer_engine(store=store, sink=RecordingSink(), clock=FixedClock(T0)).run("run-1")
    newest = max(map(checkpoint_moment, store.rows))
    clock = CausalClock(FixedClock(T0 - dt.timedelta(seconds=120)))
    assert clock.now() == T0 - dt.timedelta(seconds=119)  # nothing read yet: the worker's own time

    clock.after(store.rows)

    assert clock.now() == newest + dt.timedelta(microseconds=1)
    clock.after([])  # nothing newer: unchanged
    assert clock.now() == newest + dt.timedelta(microseconds=1)
    ahead = CausalClock(FixedClock(newest + dt.timedelta(hours=1)))
    ahead.after(store.rows)
    assert ahead.now() == newest + dt.timedelta(hours=1, seconds=1)  # a clock ahead keeps its own time


def test_a_worker_whose_clock_runs_behind_writes_records_after_those_it_read() -> None:
    store = InMemoryCheckpointStore()
    first_sink = RecordingSink()
    transfer_engine(store=store, sink=first_sink, clock=FixedClock(T0)).run("run-1")
    before = list(store.rows)
    later = RecordingSink()
    later.tables, later.names = first_sink.tables, first_sink.names

    transfer_engine(
        store=store,
        source=MemorySource(orders_rows(days=4)),  # a new day to move
        sink=later,
        clock=FixedClock(T0 - dt.timedelta(seconds=120)),  # another worker, two minutes behind
    ).run("run-2")

    written = store.rows[len(before) :]
    assert written and all(c.run_id == "run-2" for c in written)
    assert min(map(checkpoint_moment, written)) > max(map(checkpoint_moment, before))
