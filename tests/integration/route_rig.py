"""The shared rig of the route tests: a demo SQLite source, chDB target, and a checkpoint store per backend.

Black-box by design: runs go through ``dpone`` (the CLI), and targets are read back value by value
(``source_rows`` / ``target_rows`` print both sides alike). ``store_url`` and ``base`` are fixtures
(re-exported by this folder's ``conftest.py``); manifests reach the store as connection ``spelling_state``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sqlite3
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.sources.partition_planning import legacy_read_definition_hash
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import partition_id_for
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.builders import chdb_endpoint

ROWS = 1_200
TARGET = "demo.orders"


#: The checkpoint stores a route test can run on.
STORES = ("sqlite", "postgres")
#: Set to 1 to run every route test on both stores (``stores_for``).
BOTH_STORES_ENV = "DPONE_TEST_BOTH_STORES"


def stores_for(test_name: str) -> list[str]:
    """The stores ``test_name`` runs on: one, picked by its name, so that the suite runs about half of its
    route tests on each (both stores stay covered at half the cost: CI has 20 minutes); both with
    ``DPONE_TEST_BOTH_STORES=1``. What differs between the stores is proven by their own suites
    (test_checkpoint_store, test_postgres_store_*, test_route_lease); a route test proves the guard's logic,
    which reads either store through the same port."""
    if os.environ.get(BOTH_STORES_ENV) == "1":
        return list(STORES)
    return [STORES[zlib.crc32(test_name.encode()) % len(STORES)]]


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The checkpoint store's URL; manifests reach it as connection ``spelling_state``. Parametrized by
    this folder's ``conftest.py`` (``stores_for``) or by a test's own ``indirect`` parametrization; a test
    of another folder gets the store ``stores_for`` picks."""
    kind = getattr(request, "param", None) or stores_for(request.function.__name__)[0]  # outside this folder
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.sqlite'}"
        monkeypatch.setenv("AIRFLOW_CONN_SPELLING_STATE", url)
        return url
    base: str = request.getfixturevalue("postgres_url")
    schema_db = f"dpone_spelling_{abs(hash(str(tmp_path))) % 10**9}"
    engine = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{schema_db}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{schema_db}"'))
    engine.dispose()
    url = sa.engine.make_url(base).set(database=schema_db)
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPELLING_STATE", url.set(drivername="postgresql").render_as_string(False)
    )
    return url.render_as_string(hide_password=False)


def write_manifest(
    base: Path,
    table: str,
    store_url: str,
    *,
    name: str = "spelling",
    target: str = TARGET,
    strategy: str = "incremental_append",
) -> Path:
    """A day route of ``table`` as the manifest spells it, one file per (name, spelling); its checkpoints
    go to ``store_url`` (the fixture's store, reached as connection ``spelling_state``)."""
    file = f"{name}-{abs(hash(table)) % 10**6}.yaml"
    return manifest_at(base, table=table, name=name, target=target, strategy=strategy, file=file)


def dpone(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@dataclass(frozen=True)
class Ran:
    """What one ``dpone`` command returned, as a process would: its exit code and both streams."""

    returncode: int
    stdout: str
    stderr: str


def dpone_from(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> Ran:
    """``dpone ARGS`` in this process as a process started in ``cwd`` would run it (manifests name files
    relative to it), with none of the suite's ``AIRFLOW_CONN_*`` but those ``env`` sets: a process per
    command cost ~2 s of start-up each."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("AIRFLOW_CONN_")}
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(cli, list(args), env={**unset, **(env or {})}, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def source_rows(base: Path, table: str = "orders") -> list[tuple[Any, ...]]:
    """The source rows in a form both sides print alike (the amount as an exact 2-place decimal)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        rows = db.execute(f"SELECT id, order_date, customer, amount, updated_at FROM {table}").fetchall()
    return sorted((r[0], r[1], r[2], cents(str(r[3])), r[4]) for r in rows)


#: The demo table's columns as ``printed`` reads them from any ClickHouse target.
TARGET_COLUMNS = "id, toString(order_date), customer, toString(amount), toString(updated_at)"


def printed(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Target rows of ``SELECT TARGET_COLUMNS`` in the form :func:`source_rows` gives, sorted."""
    return sorted((r[0], r[1], r[2], cents(r[3]), r[4]) for r in rows)


def target_rows(base: Path, target: str = TARGET) -> list[tuple[Any, ...]]:
    return printed(chdb_query(base, f"SELECT {TARGET_COLUMNS} FROM {target}"))


def chdb_query(base: Path, sql: str) -> list[tuple[Any, ...]]:
    """The rows ``sql`` returns from the workspace's embedded target (``base/clickhouse``)."""
    client = open_client(chdb_endpoint(base / "clickhouse"))
    try:
        return [tuple(row) for row in client.query(sql).result_rows]
    finally:
        client.close()


def chdb_command(base: Path, statement: str) -> None:
    """Run one statement on the workspace's embedded target (a test's own edit of the target)."""
    client = open_client(chdb_endpoint(base / "clickhouse"))
    try:
        client.command(statement)
    finally:
        client.close()


def checkpoint_rows(base: Path) -> list[str]:
    """Every stored checkpoint payload (any route, any state): none may exist after a user error."""
    engine = sa.create_engine(f"sqlite:///{base / 'state.sqlite'}")
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(CHECKPOINT_TABLE):
                return []
            return [r[0] for r in conn.execute(sa.text(f"SELECT payload_text FROM {CHECKPOINT_TABLE}"))]
    finally:
        engine.dispose()


def cents(text: str) -> Decimal:
    return Decimal(text).quantize(Decimal("0.01"))


@pytest.fixture
def base(tmp_path: Path) -> Path:
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=4)
    return tmp_path


def latest_of(store_url: str, route: RouteIdentity) -> list[PartitionCheckpoint]:
    with SqlCheckpointStore(store_url) as store:
        return store.list_latest(route)


def append_armed(store_url: str, committed: list[PartitionCheckpoint], how_many: int = 1) -> None:
    """What a crash inside the target call leaves: the partition's latest row is EXPORTED/armed."""
    batch = "sha256:" + "ab" * 32
    armed = TargetCommitGuard.for_phase(GuardPhase.ARMED, batch).to_json()
    rows = [
        c.model_copy(
            update={
                "status": CheckpointStatus.EXPORTED,
                "completed_at": None,
                "diagnostics": {GUARD_KEY: armed},
            }
        )
        for c in committed[:how_many]
    ]
    with SqlCheckpointStore(store_url) as store:
        store.write_batch(rows)


def manifest_at(
    base: Path,
    *,
    table: str = "orders",
    name: str = "identity",
    strategy: str = "incremental_append",
    extra: str = "",
    kind: str = "day",
    state: str = "spelling_state",
    connection: str = "sqlite:///source.sqlite",
    target: str = TARGET,
    file: str = "route.yaml",
) -> Path:
    """A manifest of the demo route at ``base/file``; ``extra`` adds lines to its ``source`` block."""
    path = base / file
    path.write_text(
        f"""
kind: native_transfer
name: {name}
source:
  type: sqlite
  connection: {connection}
  table: '{table}'
{extra}  partitioning: {{kind: {kind}, column: order_date}}
  chunk_rows: 500
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: {target}
  strategy: {strategy}
  order_by: [order_date, id]
checkpoints:
  connection: {state}
""",
        encoding="utf-8",
    )
    return path


def add_source_rows(base: Path, rows: list[tuple[int, str]]) -> None:
    """Late rows of the given ids and days in the source (customer 'late', amount 1.25, 08:00)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, 'late', 1.25, ? || ' 08:00:00')",
            [(i, day, day) for i, day in rows],
        )


def add_a_new_day(base: Path) -> None:
    """The source gains rows of a day after the last committed one (the next run has a partition to move)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        last_day, last_id = db.execute("SELECT max(order_date), max(id) FROM orders").fetchone()
        next_day = (dt.date.fromisoformat(last_day) + dt.timedelta(days=1)).isoformat()
        db.execute(
            "INSERT INTO orders SELECT id + ?, ?, customer, amount, ? || substr(updated_at, 11) FROM orders "
            "WHERE order_date = ?",
            (last_id, next_day, next_day, last_day),
        )


#: A child process's script: takes the lease on target ``argv[2]`` in store ``argv[1]``, says "held", waits.
LEASE_HOLDER = textwrap.dedent(
    """
    import sys, time
    from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
    store = SqlCheckpointStore(sys.argv[1])
    store.ensure_schema()
    with store.lease(sys.argv[2]):
        print("held", flush=True)
        time.sleep(120)
    """
)


def hold_lease(url: str) -> subprocess.Popen[str]:
    """A child process holding TARGET's lease in the store at ``url`` (for real) until it is killed."""
    return hold_lease_of(url, TARGET)


def hold_lease_of(url: str, target: str) -> subprocess.Popen[str]:
    """A child process holding ``target``'s lease in the store at ``url`` (for real) until it is killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER, url, target], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def rewrite_as_legacy(store_url: str, manifest: Path, raw_table: str) -> list[str]:
    """Turn the route's rows into what a release before canonical naming stored: the raw spelling in the
    route key and payload, raw-table query hash and partition IDs. Returns the payloads as stored."""
    loaded = load_manifest(manifest)
    canonical = loaded.route
    raw = canonical.model_copy(update={"source_table": raw_table})
    old_hash = legacy_read_definition_hash(loaded.manifest.source, raw_table)
    with SqlCheckpointStore(store_url) as store:
        history = [
            c
            for pid in {c.partition_id for c in store.list_latest(canonical)}
            for c in store.history(canonical, pid)
        ]
    history.sort(key=lambda c: c.started_at)
    legacy = [
        c.model_copy(
            update={
                "route": raw,
                "query_hash": old_hash,
                "partition_id": partition_id_for(raw, old_hash, c.schema_hash, c.bounds),
            }
        )
        for c in history
    ]
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"DELETE FROM {CHECKPOINT_TABLE}"))
    engine.dispose()
    with SqlCheckpointStore(store_url) as store:
        store.write_batch(legacy)
    return stored_payloads(store_url)


def stored_payloads(store_url: str) -> list[str]:
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        payloads = [
            r[0] for r in conn.execute(sa.text(f"SELECT payload_text FROM {CHECKPOINT_TABLE} ORDER BY id"))
        ]
    engine.dispose()
    return payloads
