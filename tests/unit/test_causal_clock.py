"""Record times follow every record a run has read, whatever the worker's clock says (``CausalClock``).

Red before: a worker whose clock ran 120 s behind the one before wrote records that looked older than
those it had just read, and every rule ordering records by time (which definition committed last, which
commit followed the newest) read the history backwards.

The floor orders records only: what has settled, begun or may still fill is decided by the worker's own
clock. Red before: one run on a worker two days ahead floored every later worker's clock, so ``settle``
committed a day still filling (its late row never moved, exit 0) and ``lookback: 1`` took a day not begun
as its newest (today's late row never moved), and no run said a day might still fill.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow_provider_dpone.contracts.checkpoint import checkpoint_moment
from airflow_provider_dpone.contracts.report import RunReport
from airflow_provider_dpone.runtime.causal_clock import CausalClock, worker_now
from tests.doubles import (
    FixedClock,
    InMemoryCheckpointStore,
    MemorySource,
    RecordingSink,
    manifest_dict,
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


# -- what has settled or begun: the worker's own clock, never the floor ------------------------------------

UTC = dt.timezone.utc
NOV_30 = dt.date(2026, 11, 30)
DEC_1 = dt.date(2026, 12, 1)


def test_the_workers_own_time_is_never_floored() -> None:
    store = InMemoryCheckpointStore()
    transfer_engine(store=store, sink=RecordingSink(), clock=FixedClock(T0 + dt.timedelta(days=2))).run("r1")
    newest = max(map(checkpoint_moment, store.rows))
    worker = FixedClock(T0)
    clock = CausalClock(worker)
    clock.after(store.rows)

    assert clock.now() == newest + dt.timedelta(microseconds=1)  # records still follow what was read
    assert clock.wall_now() == worker.current == T0 + dt.timedelta(seconds=2)  # the worker's, not floored
    assert worker_now(clock) == T0 + dt.timedelta(seconds=3)
    assert worker_now(FixedClock(T0)) == T0 + dt.timedelta(seconds=1)  # any other clock: its own now


class _Route:
    """One route over a growing source and one target, each run on a worker with its own clock."""

    def __init__(self, rows: list[tuple[int, dt.date, int]], strategy: str, **partitioning: Any) -> None:
        self.store = InMemoryCheckpointStore()
        self.rows = rows
        self.target = RecordingSink()
        self.manifest = manifest_dict(strategy=strategy)
        self.manifest["source"]["partitioning"].update(partitioning)  # type: ignore[index]

    def run(self, run_id: str, worker_at: dt.datetime) -> RunReport:
        sink = RecordingSink()
        sink.tables, sink.names = self.target.tables, self.target.names
        return transfer_engine(
            store=self.store,
            source=MemorySource(list(self.rows)),
            sink=sink,
            clock=FixedClock(worker_at),
            manifest=self.manifest,
        ).run(run_id)

    def target_rows(self) -> list[tuple[object, ...]]:
        return sorted(self.target.tables.get("analytics.orders", []), key=lambda r: str(r[0]))

    def source_rows(self) -> list[tuple[object, ...]]:
        return sorted(self.rows, key=lambda r: str(r[0]))


def _outcome(report: RunReport) -> dict[str, tuple[str, str]]:
    return {p.label: (p.decision, p.reason) for p in report.partitions}


def test_settle_holds_a_filling_day_back_on_a_correct_worker_after_one_whose_clock_ran_ahead() -> None:
    route = _Route(orders_rows(days=3), "incremental_append", settle="2h")  # 11-28 .. 11-30
    route.run("skewed", dt.datetime(2026, 12, 3, 3, 0, tzinfo=UTC))  # real time 12-01 03:00, 2 days ahead
    route.rows.append((100, DEC_1, 1000))  # 12-01 is filling: open until 12-02 02:00

    early = route.run("correct-0100", dt.datetime(2026, 12, 2, 1, 0, tzinfo=UTC))
    route.rows.append((101, DEC_1, 1010))  # a late row of 12-01, written at 01:30
    later = route.run("correct-0300", dt.datetime(2026, 12, 2, 3, 0, tzinfo=UTC))

    assert _outcome(early)["order_date=2026-12-01"] == ("skip", "open_partition")
    assert _outcome(later)["order_date=2026-12-01"] == ("run", "missing_checkpoint")
    assert route.target_rows() == route.source_rows()  # the late row too, every value
    ahead = [n for n in early.notices if "ahead of this worker's clock" in n]
    assert len(ahead) == 1 and "run(s) skewed" in ahead[0] and "settle (2h)" in ahead[0], early.notices
    assert "2026-12-03T03:00" in ahead[0] and "--verify" in ahead[0]


def test_lookback_ranks_a_day_only_once_begun_on_the_workers_clock_after_one_that_ran_ahead() -> None:
    scheduled = dt.date(2026, 12, 20)
    route = _Route([*orders_rows(days=2), (50, scheduled, 500)], "replace_partition", lookback=1)
    route.run("skewed", dt.datetime(2026, 12, 23, 0, 30, tzinfo=UTC))  # real time 11-30 00:30, 23 days ahead
    route.rows.append((100, NOV_30, 1000))  # today's day, early

    route.run("correct-0300", dt.datetime(2026, 11, 30, 3, 0, tzinfo=UTC))
    route.rows.append((101, NOV_30, 1010))  # a late row of today
    next_day = route.run("correct-next-0300", dt.datetime(2026, 12, 1, 3, 0, tzinfo=UTC))

    assert _outcome(next_day)["order_date=2026-11-30"] == ("run", "lookback")
    assert _outcome(next_day)["order_date=2026-12-20"] == ("skip", "committed")
    # the double appends a replaced day again (the delete within bounds is the real sink's): every source
    # row, the late one too, has reached the target
    assert set(route.target_rows()) == set(route.source_rows())


def test_a_day_still_filling_is_named_on_a_correct_worker_after_one_whose_clock_ran_ahead() -> None:
    route = _Route(orders_rows(days=3), "incremental_append")  # no settle: today's day commits, with a note
    route.run("skewed", dt.datetime(2026, 12, 3, 3, 0, tzinfo=UTC))
    route.rows.append((100, DEC_1, 1000))

    today = route.run("correct", dt.datetime(2026, 12, 1, 9, 0, tzinfo=UTC))

    assert _outcome(today)["order_date=2026-12-01"] == ("run", "missing_checkpoint")
    filling = [n for n in today.notices if "may still be filling" in n]
    assert len(filling) == 1 and "order_date=2026-12-01" in filling[0], today.notices
    assert not any("ahead of this worker's clock" in n for n in today.notices)  # no settle: no such note


# -- who ran ahead, and what was committed while still open -------------------------------------------------


def _ahead_notice(report: RunReport) -> str:
    ahead = [
        n for n in report.notices if "records of target table" in n and "ahead of this worker's clock" in n
    ]
    assert len(ahead) == 1, report.notices
    return ahead[0]


def _open_notices(report: RunReport) -> list[str]:
    return [n for n in report.notices if "committed while still open by this worker's clock" in n]


def test_the_records_ahead_notice_names_the_run_that_ran_ahead_never_a_correct_one_that_followed() -> None:
    """Red before: every record after the skewed run's is floored one tick after the newest one read, so the
    newest is always the last run's: run B's notice named correct run A as the one whose clock ran ahead."""
    route = _Route(orders_rows(days=3), "incremental_append", settle="2h")  # 11-28 .. 11-30
    route.run("skewed", dt.datetime(2026, 12, 3, 3, 0, tzinfo=UTC))  # real time 12-01 03:00, 2 days ahead
    route.rows.append((100, dt.date(2026, 11, 20), 1000))  # an old day found later: run A commits it
    route.run("correct-a", dt.datetime(2026, 12, 1, 4, 0, tzinfo=UTC))

    notice = _ahead_notice(route.run("correct-b", dt.datetime(2026, 12, 1, 5, 0, tzinfo=UTC)))

    first, _, followed = notice.partition("later run(s)")
    assert "run(s) skewed wrote them first, from 2026-12-03T03:00" in first, notice
    assert "correct-a" not in first and "correct-a" in followed, notice
    assert "their workers' clocks are not in question" in followed
    assert "correct the clock of the worker(s) that ran skewed (NTP)" in notice
    assert "the newest at 2026-12-03T03:00" in notice and "settle (2h)" in notice and "--verify" in notice


def test_the_records_ahead_notice_finds_the_skewed_run_after_a_lookback_replaced_all_its_records() -> None:
    """Red before (and without reading the replaced records): the lookback replaced every day the skewed
    run committed, so the latest records ahead were all correct run A's, and A was named."""
    route = _Route(orders_rows(days=3), "replace_partition", settle="2h", lookback=3)
    route.run("skewed", dt.datetime(2026, 12, 3, 3, 0, tzinfo=UTC))
    route.run("correct-a", dt.datetime(2026, 12, 1, 4, 0, tzinfo=UTC))  # replaces 11-28 .. 11-30 again
    assert {c.run_id for c in route.store.list_latest(route.store.rows[0].route)} == {"correct-a"}

    notice = _ahead_notice(route.run("correct-b", dt.datetime(2026, 12, 1, 5, 0, tzinfo=UTC)))

    first, _, followed = notice.partition("later run(s)")
    assert "run(s) skewed wrote them first" in first and "correct-a" not in first, notice
    assert "correct-a" in followed and "correct-b" not in notice
    assert "correct the clock of the worker(s) that ran skewed (NTP)" in notice


def test_the_records_ahead_notice_names_every_run_that_wrote_its_own_time_ahead_earliest_first() -> None:
    route = _Route(orders_rows(days=3), "incremental_append", settle="2h")
    route.run("skewed-2d", dt.datetime(2026, 12, 3, 3, 0, tzinfo=UTC))  # real 12-01 03:00
    route.rows.append((100, dt.date(2026, 11, 20), 1000))
    route.run("correct-a", dt.datetime(2026, 12, 1, 4, 0, tzinfo=UTC))
    route.rows.append((101, dt.date(2026, 11, 21), 1010))
    route.run("skewed-3d", dt.datetime(2026, 12, 4, 5, 0, tzinfo=UTC))  # real 12-01 05:00, 3 days ahead

    notice = _ahead_notice(route.run("correct-b", dt.datetime(2026, 12, 1, 6, 0, tzinfo=UTC)))

    assert "run(s) skewed-2d, skewed-3d wrote them first, from 2026-12-03T03:00" in notice, notice
    assert "later run(s) correct-a only timed" in notice and "the newest at 2026-12-04T05:00" in notice


def test_a_day_committed_while_still_open_on_this_workers_clock_is_named_with_its_run_and_repair() -> None:
    """Red before: a worker 90 minutes ahead under ``settle: 2h`` committed a day still filling; its late row
    never moved (exit 0), and no run said a word: its records were never more than ``settle`` ahead."""
    route = _Route(orders_rows(days=3), "incremental_append", settle="2h")  # 11-28 .. 11-30
    route.rows.append((100, NOV_30 + dt.timedelta(days=1), 1000))  # 12-01, open until 12-02 02:00
    # real time 12-02 00:45; this worker's clock reads 02:15, so 12-01 looks settled
    route.run("ahead-90min", dt.datetime(2026, 12, 2, 2, 15, tzinfo=UTC))
    route.rows.append((101, DEC_1, 1010))  # a late row of 12-01, at 01:30

    early = route.run("correct-0140", dt.datetime(2026, 12, 2, 1, 40, tzinfo=UTC))
    later = route.run("correct-0300", dt.datetime(2026, 12, 2, 3, 0, tzinfo=UTC))

    assert _outcome(early)["order_date=2026-12-01"] == ("skip", "committed")
    assert (101, DEC_1, 1010) not in route.target_rows()  # lost: what the notice is for
    opened = _open_notices(early)
    assert len(opened) == 1, early.notices
    assert "1 partition(s) were committed while still open" in opened[0]
    assert "(order_date=2026-12-01; by run(s) ahead-90min)" in opened[0]
    assert "after that commit are not in target table analytics.orders" in opened[0]
    assert "copy the rows the target lacks by hand" in opened[0] and "m.yaml --verify" in opened[0]
    assert not any("records of target table" in n for n in early.notices)  # 35 min ahead: under settle
    assert not _open_notices(later)  # settled by this worker's clock now: no evidence left, no word


def test_a_correct_worker_after_correct_workers_says_nothing_of_clocks() -> None:
    route = _Route(orders_rows(days=3), "incremental_append", settle="2h")
    route.run("r1", dt.datetime(2026, 12, 1, 3, 0, tzinfo=UTC))
    route.rows.append((100, DEC_1, 1000))
    route.run("r2", dt.datetime(2026, 12, 2, 2, 30, tzinfo=UTC))  # 12-01 settled at 02:00: committed

    report = route.run("r3", dt.datetime(2026, 12, 2, 2, 31, tzinfo=UTC))

    assert not [n for n in report.notices if "clock" in n], report.notices


def test_the_repair_a_day_committed_open_needs_follows_the_strategy() -> None:
    with_lookback = _Route(orders_rows(days=3), "replace_partition", settle="2h", lookback=1)
    with_lookback.rows.append((100, DEC_1, 1000))
    with_lookback.run("ahead", dt.datetime(2026, 12, 2, 2, 15, tzinfo=UTC))
    with_lookback.rows.append((101, DEC_1, 1010))
    early = with_lookback.run("correct-0140", dt.datetime(2026, 12, 2, 1, 40, tzinfo=UTC))
    later = with_lookback.run("correct-0300", dt.datetime(2026, 12, 2, 3, 0, tzinfo=UTC))

    (said,) = _open_notices(early)
    assert "the lookback replaces them once they have settled" in said and "1 most recent" in said, said
    assert _outcome(later)["order_date=2026-12-01"] == ("run", "lookback")  # as the notice says
    assert set(with_lookback.target_rows()) == set(with_lookback.source_rows())

    without = _Route(orders_rows(days=3), "replace_partition", settle="2h")
    without.rows.append((100, DEC_1, 1000))
    without.run("ahead", dt.datetime(2026, 12, 2, 2, 15, tzinfo=UTC))
    (said,) = _open_notices(without.run("correct-0140", dt.datetime(2026, 12, 2, 1, 40, tzinfo=UTC)))
    assert "no run moves them again" in said and "source.partitioning.lookback reaches them" in said, said
