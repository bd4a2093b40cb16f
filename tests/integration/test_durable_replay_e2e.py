"""Durable quality replay end to end, on chDB and on the ClickHouse 18.16 server over HTTP.

Real components only: the demo SQLite source, the target, a SQLite checkpoint/capsule database, the
supervised reader worker. Runs go through the CLI (``dpone`` in this process; its reader worker a process
of its own) and through ``compose`` (the path the Airflow operator takes). The one injected fault is
another writer altering the target between publication and observation, done by a test-only wrapper
around the reader port.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.capsule_store import SqlCapsuleStore
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.target_reader import SupervisedTargetReader
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.capsule import CapsuleChain, TargetComplete
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.target_observation import ReaderOutcome, TargetReadRequest
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.replay.budget import BUDGET_VARIABLE
from airflow_provider_dpone.runtime.replay.ref import operation_id_for
from tests.integration.route_rig import Ran, dpone_from, hold_lease_of, rewrite_as_legacy

pytestmark = pytest.mark.service

ROWS, DAYS = 600, 6
MANIFEST = """\
kind: native_transfer
name: replay_orders
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: {sink}
  table: {table}
  strategy: incremental_append
  order_by: [order_date, id]
  options:
    durable_quality_replay: {durable}
checkpoints:
  connection: sqlite:///state.sqlite
quality:
  checks:
    - {{type: row_count}}
    - {{type: not_null, columns: [customer, amount]}}
    - {{type: unique, columns: [id]}}
    - {{type: null_count, columns: [updated_at]}}
    - {{type: distinct_count, columns: [customer], severity: warn}}
"""


@dataclass
class Route:
    """One route's files and target, on one backend."""

    base: Path
    table: str
    env: dict[str, str]
    sink: str
    client: Callable[[], Any]

    @property
    def manifest(self) -> Path:
        return self.base / "manifest.yaml"

    def write_manifest(self, *, durable: bool) -> None:
        text = MANIFEST.format(sink=self.sink, table=self.table, durable="true" if durable else "false")
        self.manifest.write_text(text, encoding="utf-8")

    def dpone(self, *args: str, **more_env: str) -> Ran:
        """``dpone ARGS`` from the route's folder, in this process (its reader worker still a process of its
        own), with only the route's environment (and ``more_env``)."""
        return dpone_from(self.base, *args, env={**self.env, **more_env})

    def query(self, sql: str) -> Any:
        client = self.client()
        try:
            return client.query(sql).result_rows
        finally:
            client.close()

    def command(self, sql: str) -> None:
        client = self.client()
        try:
            client.command(sql)
        finally:
            client.close()

    def target_count(self) -> int:
        return int(self.query(f"SELECT count() FROM {self.table}")[0][0])

    def chain(self, run_id: str) -> CapsuleChain:
        store = SqlCapsuleStore(f"sqlite:///{self.base / 'state.sqlite'}")
        try:
            stored = store.read(operation_id_for(load_manifest(self.manifest).identity, run_id))
        finally:
            store.close()
        assert isinstance(stored, CapsuleChain)
        return stored


@pytest.fixture(params=["chdb", "http"])
def route(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Route]:
    import clickhouse_connect

    create_demo_source(tmp_path / "source.sqlite", ROWS, days=DAYS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    env["TZ"] = "UTC"
    if request.param == "chdb":
        chdb_dir: Path = request.getfixturevalue("chdb_dir")
        made = Route(
            tmp_path,
            "demo.orders",
            env,
            f"chdb:///{os.path.relpath(chdb_dir, tmp_path)}",
            lambda: clickhouse_connect.get_client(interface="chdb", path=str(chdb_dir)),
        )
        made.write_manifest(durable=True)
        yield made
        return
    server: EndpointDescriptor = request.getfixturevalue("clickhouse_http")
    database = f"dpone_replay_{uuid.uuid4().hex[:10]}"
    conn = {
        "conn_type": "clickhouse",
        "host": server.host,
        "port": server.port,
        "login": server.user,
        "password": server.secret() or "",
    }
    env["AIRFLOW_CONN_REPLAY_CLICKHOUSE"] = json.dumps(conn)
    monkeypatch.setenv("AIRFLOW_CONN_REPLAY_CLICKHOUSE", json.dumps(conn))

    def client() -> Any:
        return clickhouse_connect.get_client(
            host=server.host,
            port=server.port,
            username=server.user or "default",
            password=server.secret() or "",
            compress=False,
        )

    made = Route(tmp_path, f"{database}.orders", env, "replay_clickhouse", client)
    made.write_manifest(durable=True)
    try:
        yield made
    finally:
        made.command(f"DROP DATABASE IF EXISTS {database}")


class AlteringReader:
    """Test-only wrapper of the reader port: another writer changes the target, then the real reader runs."""

    def __init__(self, alter: Callable[[], None]) -> None:
        self.inner = SupervisedTargetReader()
        self.alter = alter

    def prove_spawn_capability(self) -> None:
        self.inner.prove_spawn_capability()

    def observe(
        self, endpoint: EndpointDescriptor, request: TargetReadRequest, budget_s: float = 60.0
    ) -> ReaderOutcome:
        self.alter()
        return self.inner.observe(endpoint, request, budget_s)


def run_in_process(route: Route, run_id: str, reader: AlteringReader) -> DponeError:
    loaded = load_manifest(route.manifest)
    with (
        open_runtime(loaded, manifest_ref=str(route.manifest), target_reader=reader) as runtime,
        pytest.raises(DponeError) as caught,
    ):
        runtime.run(run_id)
    return caught.value


def test_cli_run_completes_a_v2_capsule_and_its_retry_replays_without_the_source(route: Route) -> None:
    first = route.dpone("run", str(route.manifest), "--run-id", "r1", "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["quality"]["capsule_state"] == "complete" and report["quality"]["verdict"] == "passed"
    assert report["rows_committed"] == ROWS
    chain = route.chain("r1")
    assert [r.kind.value for r in chain.records] == ["sealed_core", "target_pending", "complete"]
    assert isinstance(chain.terminal, TargetComplete)
    assert route.target_count() == ROWS

    (route.base / "source.sqlite").rename(route.base / "source.sqlite.away")
    again = route.dpone("run", str(route.manifest), "--run-id", "r1", "--json")
    assert again.returncode == 0, again.stderr
    replayed = json.loads(again.stdout)
    assert replayed["quality"]["replayed"] is True and replayed["rows_committed"] == 0
    assert route.target_count() == ROWS
    assert route.chain("r1").head_sha256 == chain.head_sha256  # nothing appended, nothing observed again
    # a new run must read the source: without it, it fails (and touches nothing)
    fresh = route.dpone("run", str(route.manifest), "--run-id", "r2")
    assert fresh.returncode == 1 and "source_unreachable" in fresh.stderr


def test_target_altered_after_publication_is_a_mismatch_that_blocks_the_route(route: Route) -> None:
    day = "2026-11-28"  # inside the generation: the demo's last days
    alter = lambda: route.command(  # noqa: E731
        f"INSERT INTO {route.table} (id, order_date, customer, amount, updated_at) "
        f"VALUES (999999, toDate('{day}'), 'intruder', 1.00, toDateTime('2026-11-28 10:00:00'))"
    )
    err = run_in_process(route, "r1", AlteringReader(alter))
    assert err.code is ErrorCode.QUALITY_CHECK_FAILED and err.details["published"] is True
    failed = {c["check"] for c in err.details["checks"]}
    assert "row_count" in failed and "unique" not in failed
    assert isinstance(route.chain("r1").terminal, TargetComplete)

    blocked = route.dpone("run", str(route.manifest), "--run-id", "r2")
    assert blocked.returncode == 3, blocked.stderr
    assert "error: quality_replay_unresolved:" in blocked.stderr
    status = route.dpone("replay", "status", str(route.manifest), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["blocked"] is True
    assert route.target_count() == ROWS + 1  # the blocked run wrote nothing

    resolved = route.dpone(
        "replay",
        "resolve",
        str(route.manifest),
        "--run-id",
        "r1",
        "--as",
        "failed",
        "--reason",
        "intruder row",
    )
    assert resolved.returncode == 0, resolved.stderr
    assert route.dpone("run", str(route.manifest), "--run-id", "r3").returncode == 0  # unblocked
    again = route.dpone("run", str(route.manifest), "--run-id", "r1")
    assert again.returncode == 1 and "quality_check_failed" in again.stderr  # never a success


def test_pending_capsule_is_not_bypassed_when_the_selector_is_turned_off(
    route: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a budget no worker can meet, set with the operators' knob: a real timeout, a real kill and reap,
    # TARGET_PENDING stays
    monkeypatch.setenv(BUDGET_VARIABLE, "0.001")
    err = run_in_process(route, "r1", AlteringReader(lambda: None))
    monkeypatch.delenv(BUDGET_VARIABLE)
    assert err.code is ErrorCode.QUALITY_REPLAY_UNRESOLVED
    assert err.details["outcome"] == "timeout" and err.details["reader_guard"] == "released"
    assert route.chain("r1").version == 2

    route.write_manifest(durable=False)
    off = route.dpone("run", str(route.manifest), "--run-id", "r2")
    assert off.returncode == 3 and "quality_replay_unresolved" in off.stderr
    assert route.target_count() == ROWS

    route.write_manifest(durable=True)
    retry = route.dpone("run", str(route.manifest), "--run-id", "r1", "--json")
    assert retry.returncode == 0, retry.stderr
    assert json.loads(retry.stdout)["quality"]["verdict"] == "passed"
    assert route.chain("r1").version == 3 and route.target_count() == ROWS


def pending_under_r1(route: Route) -> None:
    """Run r1 with a budget no reader can meet: published, its capsule pending, the route blocked."""
    first = route.dpone("run", str(route.manifest), "--run-id", "r1", **{BUDGET_VARIABLE: "0.001"})
    assert first.returncode == 3 and "quality_replay_unresolved" in first.stderr, first.stderr
    assert route.chain("r1").version == 2


def target_equals_source(route: Route) -> None:
    with sqlite3.connect(route.base / "source.sqlite") as conn:
        source = conn.execute("SELECT id, order_date, customer, amount, updated_at FROM orders ORDER BY id")
        expected = [(i, d, c, f"{a:.2f}", u) for i, d, c, a, u in source]
    target = route.query(
        f"SELECT id, toString(order_date), customer, toString(amount), toString(updated_at) "
        f"FROM {route.table} ORDER BY id"
    )
    assert [(i, d, c, f"{float(a):.2f}", u) for i, d, c, a, u in target] == expected


def resolve_r1_as_failed_unblocks(route: Route, next_run: str) -> None:
    """``replay resolve --run-id r1 --as failed``; then ``next_run`` goes through, moving nothing, and
    the target still holds exactly the source."""
    resolved = route.dpone(
        "replay", "resolve", str(route.manifest), "--run-id", "r1", "--as", "failed", "--reason", "checked"
    )
    assert resolved.returncode == 0, resolved.stderr
    after = route.dpone("run", str(route.manifest), "--run-id", next_run, "--json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["rows_committed"] == 0
    target_equals_source(route)


@pytest.mark.parametrize("route", ["chdb"], indirect=True)
def test_after_a_manifest_edit_the_blocking_run_is_listed_and_resolved_by_its_run_id(route: Route) -> None:
    pending_under_r1(route)
    # the on-call loosens a check after the failure: every operation ID of the manifest changes
    text = route.manifest.read_text(encoding="utf-8")
    route.manifest.write_text(text.replace("columns: [customer, amount]", "columns: [customer]"), "utf-8")

    retried = route.dpone("run", str(route.manifest), "--run-id", "r1")
    assert retried.returncode == 3 and "ran under another version of this manifest" in retried.stderr
    status = route.dpone("replay", "status", str(route.manifest), "--json")
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["blocked"] is True
    assert [(o["run_id"], o["under_another_manifest"]) for o in shown["operations"]] == [("r1", True)]

    resolve_r1_as_failed_unblocks(route, "r2")


@pytest.mark.parametrize("route", ["chdb"], indirect=True)
def test_an_operation_recorded_under_an_older_spelling_is_listed_and_resolved(route: Route) -> None:
    pending_under_r1(route)
    # the store as a release before canonical table names left it: the route keyed by the raw spelling
    rewrite_as_legacy(f"sqlite:///{route.base / 'state.sqlite'}", route.manifest, "ORDERS")
    blocked = route.dpone("run", str(route.manifest), "--run-id", "r2")
    assert blocked.returncode == 3 and "run=r1" in blocked.stderr, blocked.stderr

    status = route.dpone("replay", "status", str(route.manifest), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["blocked"] is True, status.stdout
    resolve_r1_as_failed_unblocks(route, "r3")


@pytest.mark.parametrize("route", ["chdb"], indirect=True)
def test_a_replay_resolution_while_a_run_of_the_target_is_live_stops_busy(route: Route) -> None:
    """``replay resolve`` takes the target's lease, as a run does: a live run's own operation looks
    pending while it publishes, and a resolution would be written past by it."""
    pending_under_r1(route)
    holder = hold_lease_of(f"sqlite:///{route.base / 'state.sqlite'}", route.table)
    try:
        busy = route.dpone(
            "replay", "resolve", str(route.manifest), "--run-id", "r1", "--as", "failed", "--reason", "x"
        )
        assert busy.returncode == 4, busy.stderr
        assert "native_transfer_route_busy" in busy.stderr
    finally:
        holder.kill()
        holder.wait(timeout=30)
    resolve_r1_as_failed_unblocks(route, "r2")


@pytest.mark.parametrize("strategy", ["replace_partition", "full_refresh"])
@pytest.mark.parametrize("route", ["chdb"], indirect=True)
def test_a_retry_of_a_run_whose_days_another_definition_replaced_since_is_not_replayed(
    route: Route, strategy: str
) -> None:
    """Red before: r1 moved the days; a manifest edit's run r2 replaced them with its filtered rows; the
    manifest was reverted and r1 retried (an Airflow clear): it replayed r1's verdict, "passed", exit 0,
    with the target holding r2's rows; the same when r2 ran under another strategy (a full refresh: another
    route of the target). Now the retry stops (quality_capsule_conflict), touching nothing, and a new run
    ID moves r1's definition again."""
    replacing = route.manifest.read_text(encoding="utf-8").replace(
        "strategy: incremental_append", "strategy: replace_partition"
    )
    route.manifest.write_text(replacing, encoding="utf-8")
    assert route.dpone("run", str(route.manifest), "--run-id", "r1").returncode == 0
    filtered = replacing.replace("strategy: replace_partition", f"strategy: {strategy}").replace(
        "  table: orders\n", '  table: orders\n  query: "SELECT * FROM orders WHERE id % 2 = 0"\n'
    )
    route.manifest.write_text(filtered, encoding="utf-8")
    # another strategy with another query deletes r1's rows on purpose: it says so (the flag) first
    edited = route.dpone("run", str(route.manifest), "--run-id", "r2", "--allow-nonempty-target")
    assert edited.returncode == 0, edited.stderr
    assert route.target_count() == ROWS // 2

    route.manifest.write_text(replacing, encoding="utf-8")
    retried = route.dpone("run", str(route.manifest), "--run-id", "r1", "--json")
    assert retried.returncode != 0, retried.stdout
    assert json.loads(retried.stdout)["error"] == "quality_capsule_conflict"
    assert route.target_count() == ROWS // 2  # nothing touched

    fresh = route.dpone("run", str(route.manifest), "--run-id", "r3", "--json")
    if strategy == "replace_partition":  # its own route under another definition: moved again
        assert fresh.returncode == 0, fresh.stderr
        assert route.target_count() == ROWS
        return
    # another route (a full refresh) rewrote every day with half its rows: each of them is named, the first
    # too (red before: the refresh's own count for its first day, 50, was taken for the source's)
    assert fresh.returncode == 3, fresh.stdout
    stopped = json.loads(fresh.stdout)
    assert stopped["details"]["problem"] == "rewritten_by_another_route"
    assert len(stopped["details"]["partitions"]) == DAYS


@pytest.mark.parametrize("route", ["chdb"], indirect=True)
def test_a_retry_of_a_completed_run_a_lookback_replaced_says_to_use_a_new_run_id(route: Route) -> None:
    """Red before: the retry of a completed run whose newest day a later run's lookback replaced printed
    ``dpone replay resolve ... --as failed``, which refuses (it blocks nothing: "nothing to close")."""
    lookback = (
        route.manifest.read_text(encoding="utf-8")
        .replace("strategy: incremental_append", "strategy: replace_partition")
        .replace("column: order_date}", "column: order_date, lookback: 1}")
    )
    assert "lookback: 1" in lookback
    route.manifest.write_text(lookback, encoding="utf-8")
    assert route.dpone("run", str(route.manifest), "--run-id", "r1").returncode == 0
    assert route.dpone("run", str(route.manifest), "--run-id", "r2").returncode == 0

    retried = route.dpone("run", str(route.manifest), "--run-id", "r1")

    said = retried.stdout + retried.stderr
    assert retried.returncode != 0, said
    assert "quality_capsule_conflict" in said
    assert "replay resolve" not in said and "new run ID" in said
    assert route.target_count() == ROWS


@pytest.mark.parametrize("route", ["chdb"], indirect=True)
@pytest.mark.parametrize("closed_as_failed", [False, True])
def test_a_retry_of_a_run_whose_every_day_a_later_run_replaced_blocks_nothing(
    route: Route, closed_as_failed: bool
) -> None:
    """Red before: once a later run's lookback had replaced *every* day of r1, no checkpoint referred to its
    capsule any more and the retry stopped with exit 3, "evidence cannot be used (complete)", which no
    command could clear (``replay resolve`` finds operations through checkpoints): in a daily DAG with a
    lookback, clearing any older DAG run. Now it is answered as when some of its days were replaced."""
    lookback = (
        route.manifest.read_text(encoding="utf-8")
        .replace("strategy: incremental_append", "strategy: replace_partition")
        .replace("column: order_date}", f"column: order_date, lookback: {DAYS}}}")
    )
    assert f"lookback: {DAYS}" in lookback
    route.manifest.write_text(lookback, encoding="utf-8")
    if closed_as_failed:
        pending_under_r1(route)
        closed = route.dpone(
            "replay", "resolve", str(route.manifest), "--run-id", "r1", "--as", "failed", "--reason", "test"
        )
        assert closed.returncode == 0, closed.stderr
    else:
        assert route.dpone("run", str(route.manifest), "--run-id", "r1").returncode == 0
    assert route.dpone("run", str(route.manifest), "--run-id", "r2").returncode == 0

    retried = route.dpone("run", str(route.manifest), "--run-id", "r1")

    assert retried.returncode == 1, retried.stderr
    if closed_as_failed:
        assert "error: quality_check_failed" in retried.stderr and "closed as failed" in retried.stderr
    else:
        assert "error: quality_capsule_conflict" in retried.stderr
        assert "new run ID" in retried.stderr and "replay resolve" not in retried.stderr
    assert route.target_count() == ROWS
    target_equals_source(route)


@pytest.mark.parametrize("route", ["chdb"], indirect=True)
def test_a_source_move_recorded_while_evidence_is_owed_leaves_the_route_blocked(route: Route) -> None:
    """``guard rebaseline --source-moved`` copies the route's newest commit; the copy keeps its capsule
    reference, so the operation whose target evidence is owed still blocks the route after the move (the
    next run went on, exit 0, over unchecked rows) and is resolved as the runbook says."""
    pending_under_r1(route)
    (route.base / "source.sqlite").rename(route.base / "moved.sqlite")
    text = route.manifest.read_text(encoding="utf-8")
    route.manifest.write_text(text.replace("sqlite:///source.sqlite", "sqlite:///moved.sqlite"), "utf-8")
    moved = route.dpone("guard", "rebaseline", str(route.manifest), "--source-moved", "--reason", "new file")
    assert moved.returncode == 0, moved.stderr

    blocked = route.dpone("run", str(route.manifest), "--run-id", "r2")
    assert blocked.returncode == 3 and "quality_replay_unresolved" in blocked.stderr, blocked.stderr
    assert "run=r1" in blocked.stderr
    (route.base / "source.sqlite").symlink_to(route.base / "moved.sqlite")  # target_equals_source reads it
    resolve_r1_as_failed_unblocks(route, "r3")


@pytest.mark.parametrize("route", ["chdb"], indirect=True)
def test_an_operation_owed_under_another_strategy_blocks_the_switched_route_until_resolved(
    route: Route,
) -> None:
    """A strategy switch starts another route over the same target: the operation the append route still
    owes evidence for blocks the replacing route too (its run went on, exit 0, ``replay status`` saying
    nothing blocked), is listed, and is resolved through the switched manifest."""
    pending_under_r1(route)
    text = route.manifest.read_text(encoding="utf-8")
    route.manifest.write_text(text.replace("incremental_append", "replace_partition"), "utf-8")

    blocked = route.dpone("run", str(route.manifest), "--run-id", "r2")
    assert blocked.returncode == 3 and "quality_replay_unresolved" in blocked.stderr, blocked.stderr
    assert "run=r1" in blocked.stderr
    status = route.dpone("replay", "status", str(route.manifest), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["blocked"] is True, status.stdout
    assert route.target_count() == ROWS  # the blocked run wrote nothing

    resolved = route.dpone(
        "replay", "resolve", str(route.manifest), "--run-id", "r1", "--as", "failed", "--reason", "checked"
    )
    assert resolved.returncode == 0, resolved.stderr
    after = route.dpone("run", str(route.manifest), "--run-id", "r3")
    assert after.returncode == 0, after.stderr
    target_equals_source(route)
