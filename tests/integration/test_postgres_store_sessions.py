"""What a run relies on in its PostgreSQL store's sessions: a lease that still holds, durable commits.

A run whose PostgreSQL lease ended under it stops before arming, writing nothing more.

The PostgreSQL lease is a session advisory lock on a connection the run keeps open and idle. The server
ends such sessions on its own terms (``idle_session_timeout``, ``pg_terminate_backend`` by a DBA, a
connection pooler or firewall dropping an idle connection), and the lock goes with them while the run goes
on. Found trying it: run A paused before arming (its pre-target work: export, staging, checks), its lease
session terminated; run B took the lease and committed every partition; run A then armed and loaded the
same partitions again, exit 0 for both, every row of the target twice. A run now proves it still holds its
lease right before arming and stops otherwise (``native_transfer_route_busy``, exit 4, details
``problem: lease_lost``), writing no further checkpoint: a ``failed_before_target`` record of its own
would hide the other run's guard. Real PostgreSQL store, the 18.16 server as the shared target, the
demo SQLite source; every target value is compared with the source.

A database or role tuned to ``synchronous_commit = off`` acknowledges commits that a server crash loses; the
store's sessions raise such a default to ``on`` (``engine._durable_commits``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.checkpoint_sql.engine import create_store_engine, parse_url
from airflow_provider_dpone.adapters.checkpoint_sql.route_lease import lock_id, postgres_lease
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.cli.demo_cmd import DEMO_MANIFEST
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.report import RunReport
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.progress import SilentProgress
from tests.integration.hand_made_target_rig import query_rows, server_connection
from tests.integration.route_rig import TARGET_COLUMNS, printed, source_rows

ROWS = 3_000


def server_rows(endpoint: EndpointDescriptor, table: str) -> list[tuple[Any, ...]]:
    return printed(query_rows(endpoint, f"SELECT {TARGET_COLUMNS} FROM {table}"))


class PausedAtArm(SilentProgress):
    """A progress listener that holds the run at the moment it is about to arm, until released."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def stage(self, name: str) -> None:
        if name == "arm":
            self.reached.set()
            assert self.release.wait(timeout=120)


@pytest.fixture
def store(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh PostgreSQL database as connection ``lease_state``; yields its URL."""
    name = f"dpone_lease_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.engine.make_url(postgres_url).set(database=name)
    monkeypatch.setenv("AIRFLOW_CONN_LEASE_STATE", url.set(drivername="postgresql").render_as_string(False))
    yield url.render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def target(clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database of its own on the 18.16 server as connection ``lease_target``; yields the table."""
    server_connection(clickhouse_http, monkeypatch, "lease_target")
    database = f"lease_{uuid.uuid4().hex[:8]}"
    yield f"{database}.orders"
    client = open_client(clickhouse_http)
    try:
        client.command(f"DROP DATABASE IF EXISTS {database}")
    finally:
        client.close()


def write_manifest(base: Path, table: str, load: str) -> Path:
    """The demo's route into ``table`` on the server, its checkpoints in the PostgreSQL store."""
    create_demo_source(base / "source.sqlite", ROWS, days=4)
    text = (
        DEMO_MANIFEST.replace("connection: chdb:///clickhouse", "connection: lease_target")
        .replace("table: demo.orders", f"table: {table}")
        .replace("load: direct", f"load: {load}")
        .replace("connection: sqlite:///state.sqlite", "connection: lease_state")
    )
    assert "lease_target" in text and "lease_state" in text and f"load: {load}" in text
    path = base / "manifest.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def terminate_lease_sessions(store_url: str) -> int:
    """What a DBA's ``pg_terminate_backend`` (or ``idle_session_timeout``) does to the idle lease session."""
    engine = sa.create_engine(store_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            return len(
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name LIKE 'dpone lease%' AND datname = current_database()"
                    )
                ).all()
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_run_that_lost_its_lease_before_arming_stops_and_the_target_holds_each_row_once(
    tmp_path: Path, store: str, target: str, clickhouse_http: EndpointDescriptor, load: str
) -> None:
    """Red without the check: run A armed after run B committed, and the target held every row twice."""
    manifest = write_manifest(tmp_path, target, load)
    paused = PausedAtArm()
    outcome: dict[str, object] = {}

    def run_a() -> None:
        try:
            with open_runtime(load_manifest(manifest), progress=paused) as runtime:
                outcome["report"] = runtime.run("run-a")
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=run_a)
    thread.start()
    try:
        assert paused.reached.wait(timeout=120), outcome
        assert terminate_lease_sessions(store) == 1
        with open_runtime(load_manifest(manifest)) as runtime:
            report_b: RunReport = runtime.run("run-b")
        assert report_b.rows_committed == ROWS
    finally:
        paused.release.set()
        thread.join(timeout=120)

    error = outcome.get("error")
    assert isinstance(error, DponeError), outcome
    assert error.code is ErrorCode.ROUTE_BUSY and error.details["problem"] == "lease_lost"
    assert server_rows(clickhouse_http, target) == source_rows(tmp_path)
    with open_runtime(load_manifest(manifest)) as runtime:  # nothing of run A's blocks the route
        assert runtime.run("run-c").rows_committed == 0
    assert server_rows(clickhouse_http, target) == source_rows(tmp_path)


def test_a_live_lease_proves_itself_whatever_the_sign_of_its_lock_key_and_an_ended_one_does_not(
    store: str,
) -> None:
    """``pg_locks`` shows the 64-bit key as two unsigned halves: keys of both signs are found held."""
    keys = [f"demo.t{i}" for i in range(40)]
    assert {lock_id(key) < 0 for key in keys} == {True, False}
    engine = sa.create_engine(store)
    try:
        for key in keys[:6] + [k for k in keys if lock_id(k) < 0][:3]:
            with postgres_lease(engine, key) as hold:
                hold.require_held()
        with postgres_lease(engine, keys[0]) as hold:
            assert terminate_lease_sessions(store) == 1
            with pytest.raises(DponeError) as lost:
                hold.require_held()
            assert lost.value.code is ErrorCode.ROUTE_BUSY
            assert lost.value.details == {"target_table": keys[0], "problem": "lease_lost"}
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("default", "session"), [("off", "on"), ("local", "on"), ("remote_apply", "remote_apply")]
)
def test_checkpoint_commits_are_durable_whatever_the_databases_default(
    store: str, default: str, session: str
) -> None:
    """A database tuned to ``synchronous_commit = off`` acknowledges commits a crash then loses: an armed
    record gone after the target was touched lets a retry move the partitions again. The store's sessions
    raise a lossy default to ``on`` and keep a stronger one. Red without it: the sessions said ``off``."""
    admin = sa.create_engine(store, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        database = conn.execute(sa.text("SELECT current_database()")).scalar_one()
        conn.execute(sa.text(f'ALTER DATABASE "{database}" SET synchronous_commit = {default}'))
    admin.dispose()
    checkpoints = SqlCheckpointStore(store)
    try:
        checkpoints.ensure_schema()
        with checkpoints._engine.connect() as conn:
            assert conn.execute(sa.text("SHOW synchronous_commit")).scalar_one() == session
        with checkpoints.lease("demo.orders") as hold:
            hold.require_held()
    finally:
        checkpoints.close()


class PausedAt(SilentProgress):
    """Holds the run at its first ``stage(name)`` (``partition``: its first moved partition) until released."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reached = threading.Event()
        self.release = threading.Event()

    def _hold(self) -> None:
        if not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(timeout=120)

    def stage(self, name: str) -> None:
        if name == self.name:
            self._hold()

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        if self.name == "partition":
            self._hold()


def run_paused(manifest: Path, paused: PausedAt, run_id: str) -> tuple[threading.Thread, dict[str, object]]:
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            with open_runtime(load_manifest(manifest), progress=paused) as runtime:
                outcome["report"] = runtime.run(run_id)
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    assert paused.reached.wait(timeout=120), outcome
    return thread, outcome


def lost_its_lease(outcome: dict[str, object]) -> None:
    error = outcome.get("error")
    assert isinstance(error, DponeError), outcome
    assert error.code is ErrorCode.ROUTE_BUSY and error.details["problem"] == "lease_lost"


def test_a_run_armed_when_its_lease_ended_never_reaches_the_target_after_on_call_resolved_it(
    tmp_path: Path, store: str, target: str, clickhouse_http: EndpointDescriptor
) -> None:
    """Red without the proof after arming: run A, armed, its lease session ended; the next run stopped on
    A's armed partitions, on-call resolved them as not applied (the target held none of A's rows, and the
    lease was free), run C moved every partition, then A went on and loaded them all again: every row
    twice, exit 0 for all. A now stops before its target call and writes nothing more."""
    from click.testing import CliRunner

    from airflow_provider_dpone.cli.main import cli

    manifest = write_manifest(tmp_path, target, "direct")
    paused = PausedAt("target")
    thread, outcome = run_paused(manifest, paused, "run-a")
    try:
        assert terminate_lease_sessions(store) == 1
        with open_runtime(load_manifest(manifest)) as runtime, pytest.raises(DponeError) as blocked:
            runtime.run("run-b")
        assert blocked.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED
        resolved = CliRunner().invoke(
            cli,
            [
                "guard",
                "resolve",
                str(manifest),
                "--all-blocked",
                "--as",
                "not-applied",
                "--reason",
                "A is gone",
            ],
        )
        assert resolved.exit_code == 0, resolved.output
        with open_runtime(load_manifest(manifest)) as runtime:
            assert runtime.run("run-c").rows_committed == ROWS
    finally:
        paused.release.set()
        thread.join(timeout=120)
    lost_its_lease(outcome)
    assert server_rows(clickhouse_http, target) == source_rows(tmp_path)
    with open_runtime(load_manifest(manifest)) as runtime:  # nothing of run A's blocks the route
        assert runtime.run("run-d").rows_committed == 0


def test_a_run_whose_lease_ended_while_staging_stops_and_leaves_the_other_runs_commits_latest(
    tmp_path: Path, store: str, target: str, clickhouse_http: EndpointDescriptor
) -> None:
    """Red without the proof per chunk and before a failure record: run A, staging, lost its lease; run B
    staged and published every partition; A's next insert failed (B had dropped the staging table) and
    its failed_before_target records became the partitions' latest over B's commits, so every later run
    stopped with target_not_empty and no command could clear it."""
    manifest = write_manifest(tmp_path, target, "staged")
    paused = PausedAt("partition")
    thread, outcome = run_paused(manifest, paused, "run-a")
    try:
        assert terminate_lease_sessions(store) == 1
        with open_runtime(load_manifest(manifest)) as runtime:
            assert runtime.run("run-b").rows_committed == ROWS
    finally:
        paused.release.set()
        thread.join(timeout=120)
    lost_its_lease(outcome)
    assert server_rows(clickhouse_http, target) == source_rows(tmp_path)
    with open_runtime(load_manifest(manifest)) as runtime:
        assert runtime.run("run-c").rows_committed == 0


def test_the_lease_session_outlives_the_databases_idle_session_limits(store: str) -> None:
    """Red without lifting them for the lease session: a database default of ``idle_session_timeout``
    ended the idle lease session under a live run, and with it the lease (then every row twice)."""
    admin = sa.create_engine(store, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        database = conn.execute(sa.text("SELECT current_database()")).scalar_one()
        conn.execute(sa.text(f'ALTER DATABASE "{database}" SET idle_session_timeout = 1000'))
        conn.execute(sa.text(f'ALTER DATABASE "{database}" SET idle_in_transaction_session_timeout = 1000'))
    admin.dispose()
    engine = sa.create_engine(store)
    try:
        with postgres_lease(engine, "demo.orders") as hold:
            time.sleep(2.5)
            hold.require_held()
    finally:
        engine.dispose()


def test_the_server_probes_a_lease_sessions_client_so_a_vanished_worker_host_releases_the_lease(
    store: str,
) -> None:
    """Red without asking the server for keepalives: a worker host that lost power or its network sends no
    FIN, and the server kept its lease session (and the advisory lock) for its OS default of about 2 h 11
    min, every run of the route busy meanwhile (seen with a worker's network namespace taken down). The
    server now probes the client after 10 s idle, every 5 s, dead after 3: the lease ends within ~25 s.
    Every session of the store's engine is asked for them at connect time, the lease's among them."""
    engine = create_store_engine(parse_url(store))
    try:
        with postgres_lease(engine, "demo.orders"), engine.connect() as conn:
            settings = conn.execute(
                sa.text(
                    "SELECT name, setting FROM pg_settings WHERE name IN "
                    "('tcp_keepalives_idle', 'tcp_keepalives_interval', 'tcp_keepalives_count')"
                )
            ).all()
    finally:
        engine.dispose()
    assert dict(settings) == {
        "tcp_keepalives_idle": "10",
        "tcp_keepalives_interval": "5",
        "tcp_keepalives_count": "3",
    }


def test_a_resolution_whose_lease_ended_while_it_counted_writes_nothing(
    tmp_path: Path, store: str, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red without proving the lease before its write: on-call's resolve, its lease session ended while it
    counted the target, wrote its not-applied records anyway, over what a run that took the lease meanwhile
    had committed (the route then stopped with no command to clear it)."""
    from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
    from airflow_provider_dpone.runtime.guard.resolution import ResolutionRequest, ResolveAs

    manifest = write_manifest(tmp_path, target, "direct")

    def load_fails(*_: Any) -> int:
        raise RuntimeError("the target call failed (test)")

    loading = ClickHouseSink.load
    monkeypatch.setattr(ClickHouseSink, "load", load_fails)
    with open_runtime(load_manifest(manifest)) as runtime, pytest.raises(RuntimeError):
        runtime.run("run-a")  # armed, then its target call failed: its partitions are blocked
    monkeypatch.setattr(ClickHouseSink, "load", loading)
    counted = ClickHouseSink.count_rows

    def count_after_the_lease_ended(self: ClickHouseSink, table: str, bounds: Any) -> int:
        terminate_lease_sessions(store)
        return counted(self, table, bounds)

    monkeypatch.setattr(ClickHouseSink, "count_rows", count_after_the_lease_ended)
    request = ResolutionRequest(
        partition_ids=None, resolve_as=ResolveAs.NOT_APPLIED, reason="test", actor="oncall@test"
    )
    with open_runtime(load_manifest(manifest)) as runtime, pytest.raises(DponeError) as lost:
        runtime.resolve_guards(request)
    assert lost.value.details.get("problem") == "lease_lost"
    monkeypatch.setattr(ClickHouseSink, "count_rows", counted)
    with open_runtime(load_manifest(manifest)) as runtime:
        latest = runtime.checkpoints()
    assert latest and all(c.run_id == "run-a" for c in latest)  # no resolution record was written
