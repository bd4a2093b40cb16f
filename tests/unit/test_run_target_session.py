"""One sink per run: the pre-arm checks and the publish share it, and closing it never hides a run's error.

In-memory port doubles (a recording sink whose ``close`` can fail); the same on chDB, black-box, is
``tests/integration/test_one_target_client_per_run.py``.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.runtime.transfer import TransferEngine
from tests.doubles import (
    InjectedFault,
    InMemoryCheckpointStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
)


class _CountedSink(RecordingSink):
    def __init__(self) -> None:
        super().__init__()
        self.opened = 0
        self.closed = 0
        self.close_fails = False

    def close(self) -> None:
        self.closed += 1
        if self.close_fails:
            raise ConnectionResetError("closing the client failed")


def _engine(store: InMemoryCheckpointStore, sink: _CountedSink, days: int) -> TransferEngine:
    def open_sink() -> _CountedSink:
        sink.opened += 1
        return sink

    return transfer_engine(
        store=store,
        source=MemorySource(orders_rows(days=days)),
        open_sink=open_sink,
        manifest_ref="manifests/orders.yaml",
    )


def test_a_daily_run_opens_its_sink_once_for_the_checks_and_the_publish() -> None:
    store, sink = InMemoryCheckpointStore(), _CountedSink()
    _engine(store, sink, days=2).run("run-1")
    sink.opened = sink.closed = 0

    report = _engine(store, sink, days=3).run("run-2")  # a new day beside two committed ones

    assert report.partitions_committed == 1
    assert (sink.opened, sink.closed) == (1, 1)


def test_a_run_a_pre_arm_check_stops_closes_its_sink_and_raises_its_own_error() -> None:
    store, sink = InMemoryCheckpointStore(), _CountedSink()
    _engine(store, sink, days=2).run("run-1")
    sink.tables.clear()  # the target lost what the route committed
    sink.opened = sink.closed = 0
    sink.close_fails = True

    with pytest.raises(DponeError) as raised:
        _engine(store, sink, days=3).run("run-2")

    assert raised.value.code is ErrorCode.TARGET_LOST_COMMITTED_ROWS  # not the failing close
    assert (sink.opened, sink.closed) == (1, 1)


def test_a_load_that_fails_closes_its_sink_and_raises_its_own_error() -> None:
    store, sink = InMemoryCheckpointStore(), _CountedSink()
    sink.fail_before_mutation = True
    sink.close_fails = True

    with pytest.raises(InjectedFault):  # the target's failure, not the failing close
        _engine(store, sink, days=2).run("run-1")

    assert (sink.opened, sink.closed) == (1, 1)
