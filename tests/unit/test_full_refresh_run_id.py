"""A full refresh run again under the run ID that committed it changes nothing, and says so.

Retries of one run share its run ID, so ``plan_resume`` skips a ``full_refresh`` only when that very run
committed every partition. A constant ``--run-id`` (a cron line ``dpone run m.yaml --run-id nightly``)
makes every later refresh such a retry: seen, the source lost 500 rows and the target kept them, the run
reporting "0 committed, 45 skipped" (exit 0). The behaviour is the retry contract; the run now says why.
"""

from __future__ import annotations

import datetime as dt

from airflow_provider_dpone.runtime.transfer import TransferEngine
from tests.doubles import (
    FixedClock,
    InMemoryCheckpointStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
)

CLOCK = FixedClock(dt.datetime(2026, 12, 5, 6, 0, tzinfo=dt.timezone.utc))


def refresh(store: InMemoryCheckpointStore, sink: RecordingSink) -> TransferEngine:
    return transfer_engine(
        store=store,
        source=MemorySource(orders_rows(days=3)),
        sink=sink,
        clock=CLOCK,
        manifest_ref="manifests/orders.yaml",
        strategy="full_refresh",
    )


def test_a_refresh_under_the_run_id_that_committed_it_moves_nothing_and_says_why() -> None:
    store, sink = InMemoryCheckpointStore(), RecordingSink()
    assert refresh(store, sink).run("nightly").partitions_committed == 3
    again = refresh(store, sink).run("nightly")
    assert again.partitions_committed == 0
    assert any("was committed by run nightly" in n and "new run ID" in n for n in again.notices)


def test_a_refresh_under_a_new_run_id_refreshes_everything_without_that_notice() -> None:
    store, sink = InMemoryCheckpointStore(), RecordingSink()
    refresh(store, sink).run("nightly-1")
    again = refresh(store, sink).run("nightly-2")
    assert again.partitions_committed == 3
    assert not any("was committed by run" in n for n in again.notices)
