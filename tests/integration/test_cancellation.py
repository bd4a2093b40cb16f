"""A stop request (Airflow's on_kill) ends a real run at its next chunk, and the guard records the truth.

SQLite demo source, embedded chDB target, SQLite checkpoint store. The request is made from the run's own
progress callbacks, at a known point: inside the target call (lazy plan, direct load) the partitions become
FAILED/target_outcome_unknown and block the route; during extraction or staging they become
FAILED/failed_before_target and a new run moves every row exactly once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import read_guard
from airflow_provider_dpone.contracts.target_observation import ReaderOutcomeKind
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.cancellation import CancellationToken, TransferInterrupted
from tests.integration.target_reader_rig import assert_worker_gone, http_endpoint, plan_for

ROWS, DAYS = 2_400, 4


class CancelAt:
    """Progress listener that cancels the run at a stage, or after the first partition moved."""

    def __init__(self, token: CancellationToken, *, stage: str | None = None, after_partitions: int = 0):
        self.token, self.at_stage, self.after = token, stage, after_partitions
        self.moved = 0
        self.stages: list[str] = []

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        return None

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        self.moved += 1
        if self.after and self.moved == self.after:
            self.token.cancel("test stop request")

    def stage(self, name: str) -> None:
        self.stages.append(name)
        if name == self.at_stage:
            self.token.cancel("test stop request")


def manifest(base: Path, export: str, load: str) -> Path:
    create_demo_source(base / "source.sqlite", ROWS, days=DAYS)
    path = base / "manifest.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: cancel
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date}}
  export: {export}
  chunk_rows: 100
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: demo.orders
  strategy: incremental_append
  load: {load}
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return path


def target(base: Path) -> tuple[int, int]:
    endpoint = EndpointDescriptor(
        name="t",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.CHDB,
        path=str(base / "clickhouse"),
    )
    client = open_client(endpoint)
    try:
        exists = client.command("EXISTS TABLE demo.orders")
        if not int(exists):
            return 0, 0
        row = client.query("SELECT count(), uniqExact(id) FROM demo.orders").result_rows[0]
        return int(row[0]), int(row[1])
    finally:
        client.close()


def phases(path: Path) -> dict[str, tuple[str, str | None]]:
    with open_runtime(load_manifest(path)) as runtime:
        latest = runtime.checkpoints()
    out = {}
    for c in latest:
        guard = read_guard(c)
        out[c.bounds.label] = (c.status.value, guard.phase.value if guard else None)
    return out


def interrupted_run(path: Path, listener_args: dict[str, object]) -> CancelAt:
    token = CancellationToken()
    listener = CancelAt(token, **listener_args)  # type: ignore[arg-type]
    loaded = load_manifest(path)
    with (
        open_runtime(loaded, progress=listener, cancellation=token) as runtime,
        pytest.raises(TransferInterrupted) as stopped,
    ):
        runtime.run("stopped-run")
    assert stopped.value.reason == "test stop request"
    return listener


def test_a_stop_inside_the_target_call_blocks_the_route_with_target_outcome_unknown(tmp_path: Path) -> None:
    path = manifest(tmp_path, "lazy_plan", "direct")
    listener = interrupted_run(path, {"after_partitions": 1})
    assert "target" in listener.stages and "commit" not in listener.stages
    assert listener.moved == 1, "the run stopped at the next chunk, inside the second partition"
    state = phases(path)
    assert set(state.values()) == {("FAILED", "target_outcome_unknown")}, state
    rows, distinct = target(tmp_path)
    # what a resolve accounts for: at most the rows of the blocked partitions, never a duplicate
    assert rows == distinct and rows <= ROWS
    with open_runtime(load_manifest(path)) as runtime, pytest.raises(DponeError) as blocked:
        runtime.run("next-try")
    assert blocked.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED
    assert target(tmp_path) == (rows, distinct), "the next try stopped before the target"


@pytest.mark.parametrize(
    ("export", "load", "listener_args"),
    [
        ("file_artifact", "direct", {"stage": "extract"}),
        ("lazy_plan", "staged", {"after_partitions": 1}),
    ],
    ids=["during-extraction", "during-staging"],
)
def test_a_stop_before_the_target_call_records_failed_before_target_and_a_new_run_moves_every_row(
    tmp_path: Path, export: str, load: str, listener_args: dict[str, object]
) -> None:
    path = manifest(tmp_path, export, load)
    listener = interrupted_run(path, listener_args)
    assert "arm" not in listener.stages and "target" not in listener.stages
    state = phases(path)
    assert set(state.values()) == {("FAILED", "failed_before_target")}, state
    assert target(tmp_path) == (0, 0)
    with open_runtime(load_manifest(path)) as runtime:
        report = runtime.run("next-try")
    assert report.rows_committed == ROWS
    assert target(tmp_path) == (ROWS, ROWS)


def test_a_stop_request_kills_a_live_reader_worker_at_once_and_it_is_reaped(
    tmp_path: Path,
    black_hole: int,
) -> None:
    """The reader the runtime composes is killed on cancel: like Airflow's SIGTERM handler, the request
    is made from a signal handler in the main thread while the observation waits on the worker."""
    path = manifest(tmp_path, "lazy_plan", "direct")
    token = CancellationToken()
    previous = signal.signal(signal.SIGALRM, lambda *_: token.cancel("test SIGALRM"))
    try:
        with open_runtime(load_manifest(path), cancellation=token) as runtime:
            reader = runtime.reader()
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            started = time.monotonic()
            outcome = reader.observe(http_endpoint(black_hole), plan_for("x", "db.t"), 30.0)
            took = time.monotonic() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert token.cancelled
    assert took < 5.0, f"the observation ran on for {took:.1f}s after the stop request"
    assert outcome.kind is not ReaderOutcomeKind.COMPLETE and outcome.observation is None
    assert_worker_gone(outcome)
