"""Guard writes take one statement a checkpoint: each INSERT commits itself (the store's AUTOCOMMIT).

Arm and promotion write one checkpoint row per partition, each its own transaction (seed 000: no atomic
batch). Issued as BEGIN, INSERT, COMMIT they cost three round trips a row on PostgreSQL; in AUTOCOMMIT
the database commits the INSERT itself. Shown on a real SQLite file: no client COMMIT is issued while a
batch is written, yet every row is visible to another connection the moment its INSERT returned (a later
failure keeps the prefix), and the rows read back byte for byte.

On a SQLite file in WAL mode the batch costs one fsync, not one a row (``batch_sync``): the rows before
the last commit under ``synchronous = NORMAL``, the last under ``FULL``, whose sync of the WAL makes
every earlier row durable with it; the connection goes back to the pool under ``FULL`` whatever happens.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, partition_id_for
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

UTC = dt.timezone.utc
ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)


def _checkpoints(count: int) -> list[PartitionCheckpoint]:
    at = dt.datetime(2026, 11, 1, tzinfo=UTC)
    out = []
    for index in range(count):
        bounds = PartitionBounds(
            kind=BoundsKind.RANGE,
            column="id",
            lower=str(index),
            upper=str(index + 1),
            value_type="integer",
            label=f"id={index}..{index + 1}",
        )
        out.append(
            PartitionCheckpoint(
                partition_id=partition_id_for(ROUTE, "sha256:q", "sha256:s", bounds),
                route=ROUTE,
                run_id="run-1",
                status=CheckpointStatus.EXPORTED,
                started_at=at,
                query_hash="sha256:q",
                schema_hash="sha256:s",
                bounds=bounds,
            )
        )
    return out


def _visible_rows(path: Path) -> int:
    other = sqlite3.connect(path)
    try:
        return int(other.execute(f"SELECT count(*) FROM {CHECKPOINT_TABLE}").fetchone()[0])
    finally:
        other.close()


def test_a_batch_issues_no_client_commit_and_each_row_is_visible_when_its_insert_returns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    written = _checkpoints(5)
    with SqlCheckpointStore(f"sqlite:///{path}") as store:
        store.ensure_schema()
        commits: list[object] = []
        visible_before_each_insert: list[int] = []

        def on_commit(conn: Any) -> None:
            commits.append(conn)

        def before_insert(conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
            if statement.lstrip().upper().startswith("INSERT"):
                visible_before_each_insert.append(_visible_rows(path))

        event.listen(store._engine, "commit", on_commit)
        event.listen(store._engine, "before_cursor_execute", before_insert)
        try:
            store.write_batch(written)
        finally:
            event.remove(store._engine, "commit", on_commit)
            event.remove(store._engine, "before_cursor_execute", before_insert)
        assert commits == [], "each INSERT commits itself: no BEGIN/COMMIT round trips"
        assert visible_before_each_insert == [0, 1, 2, 3, 4], "every row committed before the next"
        latest = store.list_latest(ROUTE)
    assert [c.to_payload() for c in latest] == [c.to_payload() for c in written]


def _write_failing(
    store: SqlCheckpointStore, written: list[PartitionCheckpoint], insert: int, *, restore_fails: bool = False
) -> tuple[DponeError, sqlite3.OperationalError, list[Any]]:
    """``write_batch(written)`` with the ``insert``-th INSERT failing (and, with ``restore_fails``, every
    later ``PRAGMA synchronous = FULL``): the store's error, the injected one, the failing DB-API connection."""
    inserts = [0]
    injected = sqlite3.OperationalError("disk I/O error (injected)")
    failing: list[Any] = []

    def fail(conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        text = " ".join(statement.split()).upper()
        if text.startswith("INSERT"):
            inserts[0] += 1
            if inserts[0] == insert:
                failing.append(conn.connection.dbapi_connection)
                raise injected
        if restore_fails and failing and text == "PRAGMA SYNCHRONOUS = FULL":
            raise sqlite3.OperationalError("cannot restore (injected)")

    event.listen(store._engine, "before_cursor_execute", fail)
    try:
        with pytest.raises(DponeError) as failed:
            store.write_batch(written)
    finally:
        event.remove(store._engine, "before_cursor_execute", fail)
    return failed.value, injected, failing


def test_a_failure_mid_batch_leaves_the_written_prefix_in_the_store(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    written = _checkpoints(4)
    with SqlCheckpointStore(f"sqlite:///{path}") as store:
        store.ensure_schema()
        failed, _, _ = _write_failing(store, written, 3)
        assert failed.details["written"] == 2
        assert failed.details["partition_id"] == written[2].partition_id
        assert [c.partition_id for c in store.list_latest(ROUTE)] == [c.partition_id for c in written[:2]]
    assert _visible_rows(path) == 2


def _statements(store: SqlCheckpointStore, action: Any) -> list[str]:
    """The statements ``action()`` sends through the store's engine, PRAGMAs and INSERTs only."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        text = " ".join(statement.split()).upper()
        if text.startswith("PRAGMA"):
            seen.append(text)
        elif text.startswith("INSERT"):
            seen.append("INSERT")

    event.listen(store._engine, "before_cursor_execute", record)
    try:
        action()
    finally:
        event.remove(store._engine, "before_cursor_execute", record)
    return seen


def _pooled_synchronous(store: SqlCheckpointStore) -> int:
    """``PRAGMA synchronous`` of the connection the pool hands out next (2: FULL)."""
    with store._engine.connect() as conn:
        return int(conn.exec_driver_sql("PRAGMA synchronous").scalar())  # type: ignore[arg-type]


def test_a_batch_on_a_wal_file_syncs_once_with_its_last_row_and_the_pool_gets_full_back(
    tmp_path: Path,
) -> None:
    written = _checkpoints(5)
    with SqlCheckpointStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        store.ensure_schema()
        assert _pooled_synchronous(store) == 2
        statements = _statements(store, lambda: store.write_batch(written))
        assert statements == [
            "PRAGMA JOURNAL_MODE",
            "PRAGMA SYNCHRONOUS = NORMAL",
            "INSERT",
            "INSERT",
            "INSERT",
            "INSERT",
            "PRAGMA SYNCHRONOUS = FULL",
            "INSERT",
        ]
        assert _pooled_synchronous(store) == 2
        assert [c.to_payload() for c in store.list_latest(ROUTE)] == [c.to_payload() for c in written]
        # a single row commits under FULL as it always did: nothing to defer
        assert _statements(store, lambda: store.write_batch(_checkpoints(1))) == ["INSERT"]


def test_an_in_memory_store_keeps_one_sync_per_commit() -> None:
    with SqlCheckpointStore("sqlite://") as store:
        store.ensure_schema()
        statements = _statements(store, lambda: store.write_batch(_checkpoints(3)))
    assert statements == ["PRAGMA JOURNAL_MODE", "INSERT", "INSERT", "INSERT"]


def test_a_failed_batch_hands_the_pool_a_full_connection_and_keeps_its_exception(tmp_path: Path) -> None:
    written = _checkpoints(4)
    with SqlCheckpointStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        store.ensure_schema()
        failed, injected, _ = _write_failing(store, written, 2)
        assert failed.details["written"] == 1
        assert getattr(failed.__cause__, "orig", None) is injected
        assert _pooled_synchronous(store) == 2


def test_a_connection_that_cannot_be_set_back_to_full_is_discarded_not_pooled(tmp_path: Path) -> None:
    written = _checkpoints(4)
    with SqlCheckpointStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        store.ensure_schema()
        failed, injected, failing = _write_failing(store, written, 2, restore_fails=True)
        assert getattr(failed.__cause__, "orig", None) is injected  # the first failure is reported
        with store._engine.connect() as conn:
            assert conn.connection.dbapi_connection is not failing[0]
            assert int(conn.exec_driver_sql("PRAGMA synchronous").scalar()) == 2  # type: ignore[arg-type]
