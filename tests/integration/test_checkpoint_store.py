"""SqlCheckpointStore against real SQLite files and a real PostgreSQL 15: one suite, both backends.

Every test in ``TestBothBackends`` runs as ``[sqlite]`` and ``[postgres]``. PostgreSQL tests each get a
fresh database (the table names are a fixed public contract, so isolation is by database).
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import threading
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from pydantic import SecretStr

from airflow_provider_dpone.adapters.checkpoint_sql import (
    CHECKPOINT_TABLE,
    DEFINITIONS_TABLE,
    SOURCE_STATE_TABLE,
    SqlCheckpointStore,
    store_from_endpoint,
)
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import (
    GUARD_KEY,
    GuardInvalid,
    GuardPhase,
    TargetCommitGuard,
    read_guard,
)
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, sha256_tag
from airflow_provider_dpone.contracts.read_definition import ReadDefinition
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

pytestmark = pytest.mark.service

ROUTE = RouteIdentity(
    source_table="dbo.orders", target_table="analytics.orders", strategy=Strategy.INCREMENTAL_APPEND
)
OTHER_ROUTE = RouteIdentity(
    source_table="dbo.orders", target_table="analytics.orders", strategy=Strategy.FULL_REFRESH
)
T0 = dt.datetime(2026, 11, 30, 8, 0, 0, 123456, tzinfo=dt.timezone.utc)
BATCH = sha256_tag("run-1|batch")


def checkpoint(
    label: str,
    *,
    route: RouteIdentity = ROUTE,
    status: CheckpointStatus = CheckpointStatus.EXPORTED,
    run_id: str = "run-1",
    query_hash: str = "sha256:q1",
    schema_hash: str = "sha256:s1",
    partition_id: str | None = None,
    diagnostics: dict[str, object] | None = None,
    at: dt.datetime = T0,
) -> PartitionCheckpoint:
    bounds = PartitionBounds(
        kind=BoundsKind.RANGE,
        column="order_date",
        lower=label,
        upper=label + "+1",
        value_type="date",
        label=label,
    )
    return PartitionCheckpoint.model_validate(
        {
            "partition_id": partition_id or sha256_tag(f"{route.key()}|{query_hash}|{schema_hash}|{label}"),
            "route": route,
            "run_id": run_id,
            "status": status,
            "started_at": at,
            "completed_at": at if status is CheckpointStatus.COMMITTED else None,
            "rows": 10,
            "bytes": 1234,
            "query_hash": query_hash,
            "schema_hash": schema_hash,
            "bounds": bounds,
            "diagnostics": diagnostics or {},
        }
    )


def guarded(label: str, phase: GuardPhase, **kwargs: object) -> PartitionCheckpoint:
    status = {
        GuardPhase.ARMED: CheckpointStatus.EXPORTED,
        GuardPhase.CHECKPOINT_COMMITTED: CheckpointStatus.COMMITTED,
    }.get(phase, CheckpointStatus.FAILED)
    guard = TargetCommitGuard.for_phase(phase, BATCH).to_json()
    return checkpoint(label, status=status, diagnostics={GUARD_KEY: guard}, **kwargs)  # type: ignore[arg-type]


# -- backends ----------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty store: a SQLite file in a not-yet-existing folder, or a fresh PG database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'nested' / 'checkpoints.sqlite'}"
        return
    base = sa.engine.make_url(request.getfixturevalue("postgres_url"))
    name = "ckpt_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def store(store_url: str) -> Iterator[SqlCheckpointStore]:
    with SqlCheckpointStore(store_url) as opened:
        opened.ensure_schema()
        yield opened


def raw_rows(url: str, sql: str, **params: object) -> list[sa.Row[tuple[object, ...]]]:
    """Read the tables with a connection of its own: proves what is durable, not what a store caches."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params).all())
    finally:
        engine.dispose()


def make_third_insert_fail(url: str, partition_id: str) -> None:
    """A real database trigger that rejects one partition's insert, as a failing store would."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql(
                    f"CREATE TRIGGER reject_one BEFORE INSERT ON {CHECKPOINT_TABLE} "
                    f"WHEN NEW.partition_id = '{partition_id}' BEGIN SELECT RAISE(ABORT, 'injected'); END"
                )
            else:
                conn.exec_driver_sql(
                    "CREATE FUNCTION reject_one() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    f"IF NEW.partition_id = '{partition_id}' THEN RAISE EXCEPTION 'injected'; END IF; "
                    "RETURN NEW; END $$"
                )
                conn.exec_driver_sql(
                    f"CREATE TRIGGER reject_one BEFORE INSERT ON {CHECKPOINT_TABLE} "
                    "FOR EACH ROW EXECUTE FUNCTION reject_one()"
                )
    finally:
        engine.dispose()


# -- the suite -----------------------------------------------------------------------------------------


class TestBothBackends:
    def test_ensure_schema_twice_is_harmless_and_creates_the_contract_tables(self, store_url: str) -> None:
        with SqlCheckpointStore(store_url) as store:
            store.ensure_schema()
            store.write_batch([checkpoint("2026-11-30")])
            store.ensure_schema()
            assert len(store.list_latest(ROUTE)) == 1
        inspector_engine = sa.create_engine(store_url)
        try:
            inspector = sa.inspect(inspector_engine)
            assert {CHECKPOINT_TABLE, SOURCE_STATE_TABLE} <= set(inspector.get_table_names())
            indexed = {tuple(ix["column_names"]) for ix in inspector.get_indexes(CHECKPOINT_TABLE)}
            assert {
                ("route_key", "partition_id", "id"),
                ("route_key", "id"),
                ("target_table", "source_table", "strategy"),
            } <= indexed
            columns = {c["name"] for c in inspector.get_columns(CHECKPOINT_TABLE)}
            assert {"id", "route_key", "partition_id", "run_id", "status", "written_at", "payload"} <= columns
        finally:
            inspector_engine.dispose()

    def test_processes_racing_to_create_the_schema_all_succeed(self, store_url: str) -> None:
        stores = [SqlCheckpointStore(store_url) for _ in range(4)]
        barrier = threading.Barrier(len(stores))
        errors: list[BaseException] = []

        def create(store: SqlCheckpointStore) -> None:
            barrier.wait()
            try:
                store.ensure_schema()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=create, args=(s,)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        try:
            assert errors == []
            stores[0].write_batch([checkpoint("2026-11-30")])
            assert len(stores[3].list_latest(ROUTE)) == 1
        finally:
            for store in stores:
                store.close()

    def test_ensure_schema_refuses_a_foreign_table_of_the_same_name(self, store_url: str) -> None:
        SqlCheckpointStore(store_url).close()  # creates the SQLite file's folder
        engine = sa.create_engine(store_url)
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql(
                    f"CREATE TABLE {CHECKPOINT_TABLE} (id INTEGER PRIMARY KEY, payload TEXT)"
                )
        finally:
            engine.dispose()
        with SqlCheckpointStore(store_url) as store, pytest.raises(DponeError) as caught:
            store.ensure_schema()
        assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED
        assert f"{CHECKPOINT_TABLE}.payload_text" in caught.value.details["missing_columns"]

    def test_history_keeps_every_write_oldest_first_and_never_rewrites_rows(
        self, store: SqlCheckpointStore, store_url: str
    ) -> None:
        armed = guarded("2026-11-30", GuardPhase.ARMED)
        unknown = guarded("2026-11-30", GuardPhase.TARGET_OUTCOME_UNKNOWN)
        committed = guarded("2026-11-30", GuardPhase.CHECKPOINT_COMMITTED, run_id="run-2")
        store.write_batch([armed])
        first_row = raw_rows(store_url, f"SELECT id, payload_text FROM {CHECKPOINT_TABLE}")
        store.write_batch([unknown])
        store.write_batch([committed])

        assert store.history(ROUTE, armed.partition_id) == [armed, unknown, committed]
        rows = raw_rows(
            store_url, f"SELECT id, payload_text, status, run_id FROM {CHECKPOINT_TABLE} ORDER BY id"
        )
        assert len(rows) == 3
        assert (rows[0].id, rows[0].payload_text) == (first_row[0].id, first_row[0].payload_text)
        assert [r.status for r in rows] == ["EXPORTED", "FAILED", "COMMITTED"]
        assert [r.run_id for r in rows] == ["run-1", "run-1", "run-2"]
        assert store.history(ROUTE, "sha256:no-such-partition") == []
        assert store.history(OTHER_ROUTE, armed.partition_id) == []

    def test_list_latest_gives_the_newest_row_per_partition_whatever_its_query_or_schema_hash(
        self, store: SqlCheckpointStore
    ) -> None:
        old_query = guarded("2026-11-29", GuardPhase.ARMED, query_hash="sha256:q-old")
        old_schema_first = checkpoint("2026-11-30", schema_hash="sha256:s-old")
        old_schema_then = guarded("2026-11-30", GuardPhase.CHECKPOINT_COMMITTED, schema_hash="sha256:s-old")
        current = checkpoint("2026-12-01", status=CheckpointStatus.PLANNED)
        current_later = guarded("2026-12-01", GuardPhase.FAILED_BEFORE_TARGET)
        elsewhere = guarded("2026-11-29", GuardPhase.ARMED, route=OTHER_ROUTE)
        store.write_batch([old_query, old_schema_first, current, elsewhere])
        store.write_batch([old_schema_then, current_later])

        latest = store.list_latest(ROUTE)

        assert latest == [old_query, old_schema_then, current_later]  # append order of each latest row
        assert store.list_latest(OTHER_ROUTE) == [elsewhere]
        unknown_route = RouteIdentity(
            source_table="x", target_table="y", strategy=Strategy.INCREMENTAL_APPEND
        )
        assert store.list_latest(unknown_route) == []

    def test_read_latest_returns_only_named_partitions_that_have_a_checkpoint(
        self, store: SqlCheckpointStore
    ) -> None:
        a1, b1 = checkpoint("a"), checkpoint("b")
        a2 = guarded("a", GuardPhase.CHECKPOINT_COMMITTED)
        store.write_batch([a1, b1, a2])

        found = store.read_latest(ROUTE, [a1.partition_id, "sha256:missing", a1.partition_id])

        assert found == {a1.partition_id: a2}
        assert store.read_latest(ROUTE, []) == {}
        assert store.read_latest(OTHER_ROUTE, [a1.partition_id]) == {}

    def test_read_latest_handles_more_ids_than_one_in_list_holds(self, store: SqlCheckpointStore) -> None:
        batch = [checkpoint(f"p{i:04d}") for i in range(520)]
        store.write_batch(batch)
        found = store.read_latest(ROUTE, [c.partition_id for c in batch])
        assert len(found) == 520
        assert found[batch[-1].partition_id] == batch[-1]

    def test_payload_comes_back_byte_identical_and_the_payload_column_is_queryable_json(
        self, store: SqlCheckpointStore, store_url: str
    ) -> None:
        diagnostics: dict[str, object] = {
            "artifact_sha256": sha256_tag("file"),
            GUARD_KEY: TargetCommitGuard.for_phase(GuardPhase.ARMED, BATCH).to_json(),
            "zeta": {"nested": {"list": [1, "two", None, True, {"deep": []}], "b": -7}, "a": {}},
            "ünïcödé ключ": '値 ✓ \U0001f680 "quoted" \\ back\nline\ttab',
            "big": 12345678901234567890,
            "aa": [],
        }
        written = checkpoint("2026-11-30", diagnostics=diagnostics)
        store.write_batch([written])

        (read,) = store.list_latest(ROUTE)
        assert read.to_payload() == written.to_payload()
        assert store.history(ROUTE, written.partition_id)[0].to_payload() == written.to_payload()
        (row,) = raw_rows(store_url, f"SELECT payload_text FROM {CHECKPOINT_TABLE}")
        assert row.payload_text == written.to_payload()

        if store.backend == "postgresql":
            phase_sql = (
                f"SELECT payload->'diagnostics'->'{GUARD_KEY}'->>'phase' AS phase FROM {CHECKPOINT_TABLE}"
            )
        else:
            phase_sql = f"SELECT json_extract(payload, '$.diagnostics.{GUARD_KEY}.phase') AS phase FROM {CHECKPOINT_TABLE}"
        assert [r.phase for r in raw_rows(store_url, phase_sql)] == ["armed"]

    def test_indexed_columns_mirror_the_checkpoint_and_written_at_is_utc(
        self, store: SqlCheckpointStore, store_url: str
    ) -> None:
        before = dt.datetime.now(dt.timezone.utc)
        written = guarded("2026-11-30", GuardPhase.ARMED, run_id="run-7")
        store.write_batch([written])
        after = dt.datetime.now(dt.timezone.utc)

        (row,) = raw_rows(store_url, f"SELECT * FROM {CHECKPOINT_TABLE}")
        assert (row.route_key, row.source_table, row.target_table, row.strategy) == (
            ROUTE.key(),
            "dbo.orders",
            "analytics.orders",
            "incremental_append",
        )
        assert (row.partition_id, row.run_id, row.status) == (written.partition_id, "run-7", "EXPORTED")
        written_at = row.written_at
        if isinstance(written_at, str):  # SQLite hands back text when read without column types
            written_at = dt.datetime.fromisoformat(written_at)
        if written_at.tzinfo is None:  # SQLite keeps no offset: the store writes UTC
            written_at = written_at.replace(tzinfo=dt.timezone.utc)
        assert before - dt.timedelta(seconds=1) <= written_at <= after + dt.timedelta(seconds=1)

    def test_write_batch_commits_each_row_before_writing_the_next(
        self, store: SqlCheckpointStore, store_url: str
    ) -> None:
        batch = [guarded(f"2026-12-0{i}", GuardPhase.ARMED) for i in range(1, 5)]
        make_third_insert_fail(store_url, batch[2].partition_id)

        with pytest.raises(DponeError) as caught:
            store.write_batch(batch)

        assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED
        assert caught.value.details["written"] == 2
        assert caught.value.details["partition_id"] == batch[2].partition_id
        assert isinstance(caught.value.__cause__, sa.exc.DBAPIError)
        assert "injected" not in str(caught.value)
        with SqlCheckpointStore(store_url) as fresh:  # a new process's view: the prefix is durable
            assert fresh.list_latest(ROUTE) == batch[:2]
            assert fresh.read_latest(ROUTE, [c.partition_id for c in batch]) == {
                c.partition_id: c for c in batch[:2]
            }

    def test_a_batch_holding_an_unserializable_checkpoint_writes_nothing(
        self, store: SqlCheckpointStore
    ) -> None:
        batch = [checkpoint("a"), checkpoint("b", diagnostics={"ratio": float("nan")}), checkpoint("c")]
        with pytest.raises(DponeError) as caught:
            store.write_batch(batch)
        assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED
        assert caught.value.details["partition_id"] == batch[1].partition_id
        assert store.list_latest(ROUTE) == []

    def test_source_state_is_absent_then_upserted_per_route(self, store: SqlCheckpointStore) -> None:
        assert store.read_state(ROUTE) is None
        store.advance_state(ROUTE, {"cursor": "2026-11-30T00:00:00", "rows": 10})
        store.advance_state(OTHER_ROUTE, {"cursor": "a"})
        store.advance_state(ROUTE, {"cursor": "2026-12-01T00:00:00", "nested": {"ünï": [1, 2]}})

        assert store.read_state(ROUTE) == {"cursor": "2026-12-01T00:00:00", "nested": {"ünï": [1, 2]}}
        assert store.read_state(OTHER_ROUTE) == {"cursor": "a"}
        with pytest.raises(DponeError) as caught:
            store.advance_state(ROUTE, {"cursor": dt.date(2026, 1, 1)})
        assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED
        assert store.read_state(ROUTE) == {"cursor": "2026-12-01T00:00:00", "nested": {"ünï": [1, 2]}}

    def test_a_definition_is_kept_once_per_route_and_query_hash_and_read_back_exactly(
        self, store: SqlCheckpointStore, store_url: str
    ) -> None:
        first = ReadDefinition(
            source_type="sqlite", table="main.ev", query="SELECT *\n  FROM ev -- 'ü'", columns=("id", "ts")
        )
        other = first.model_copy(update={"query": "SELECT * FROM ev WHERE id > 1"})
        store.record_definition(ROUTE, first)
        store.record_definition(ROUTE, first)  # kept already: one insert that does nothing

        assert store.read_definitions(ROUTE, [first.query_hash(), other.query_hash()]) == {
            first.query_hash(): first
        }
        assert store.read_definitions(OTHER_ROUTE, [first.query_hash()]) == {}
        assert store.read_definitions(ROUTE, []) == {}
        rows = raw_rows(store_url, f"SELECT route_key, query_hash, definition FROM {DEFINITIONS_TABLE}")
        assert [tuple(r) for r in rows] == [(ROUTE.key(), first.query_hash(), first.canonical_text())]

    def test_a_kept_definition_that_is_not_the_one_its_key_names_is_left_out(
        self, store: SqlCheckpointStore, store_url: str
    ) -> None:
        """A hand-edited row would otherwise be compared as the definition that committed the rows."""
        first = ReadDefinition(source_type="sqlite", table="main.ev", query="SELECT * FROM ev")
        second = first.model_copy(update={"query": "SELECT * FROM ev WHERE id > 1"})
        store.record_definition(ROUTE, first)
        store.record_definition(ROUTE, second)
        engine = sa.create_engine(store_url)
        try:
            with engine.begin() as conn:
                conn.execute(
                    sa.text(f"UPDATE {DEFINITIONS_TABLE} SET definition = :text WHERE query_hash = :hash"),
                    [
                        {"text": second.canonical_text(), "hash": first.query_hash()},
                        {"text": "not json", "hash": second.query_hash()},
                    ],
                )
        finally:
            engine.dispose()

        assert store.read_definitions(ROUTE, [first.query_hash(), second.query_hash()]) == {}

    def test_a_store_made_before_the_definitions_table_gets_it_and_keeps_its_checkpoints(
        self, store_url: str
    ) -> None:
        with SqlCheckpointStore(store_url) as store:
            store.ensure_schema()
            store.write_batch([checkpoint("2026-11-30")])
        engine = sa.create_engine(store_url)
        try:
            with engine.begin() as conn:  # the store as an earlier release left it
                conn.execute(sa.text(f"DROP TABLE {DEFINITIONS_TABLE}"))
        finally:
            engine.dispose()
        definition = ReadDefinition(source_type="sqlite", table="main.ev", query="SELECT 1")

        with SqlCheckpointStore(store_url) as store:
            store.ensure_schema()
            store.record_definition(ROUTE, definition)
            assert store.read_definitions(ROUTE, [definition.query_hash()]) == {
                definition.query_hash(): definition
            }
            assert [c.bounds.label for c in store.list_latest(ROUTE)] == ["2026-11-30"]

    def test_a_closed_store_refuses_work_with_the_store_error_code(self, store: SqlCheckpointStore) -> None:
        store.close()
        store.close()
        for call in (lambda: store.list_latest(ROUTE), lambda: store.write_batch([checkpoint("x")])):
            with pytest.raises(DponeError) as caught:
                call()
            assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED

    def test_a_payload_that_disagrees_with_its_row_is_an_unreadable_stand_in_that_fails_closed(
        self, store: SqlCheckpointStore, store_url: str
    ) -> None:
        store.write_batch([checkpoint("a")])
        engine = sa.create_engine(store_url)
        try:
            with engine.begin() as conn:  # an operator's hand edit, not something the store would do
                conn.execute(
                    sa.text(f'UPDATE {CHECKPOINT_TABLE} SET payload_text = \'{{"status": "oops"}}\'')
                )
        finally:
            engine.dispose()
        (stand_in,) = store.list_latest(ROUTE)
        assert stand_in.partition_id == checkpoint("a").partition_id
        with pytest.raises(GuardInvalid) as caught:
            read_guard(stand_in)
        assert caught.value.reason == "stored checkpoint is unreadable"
        assert "oops" not in stand_in.to_payload()

    def test_store_from_endpoint_builds_the_same_store(self, store_url: str, tmp_path: Path) -> None:
        url = sa.engine.make_url(store_url)
        if url.get_backend_name() == "sqlite":
            endpoint = EndpointDescriptor(name="state", kind=EndpointKind.SQLITE, path="sub/dir/state.sqlite")
            expected_file = tmp_path / "manifests" / "sub" / "dir" / "state.sqlite"
        else:
            endpoint = EndpointDescriptor(
                name="checkpoints_pg",
                kind=EndpointKind.POSTGRES,
                host=url.host,
                port=url.port,
                database=url.database,
                user=url.username,
                password=SecretStr(url.password) if url.password else None,
            )
            expected_file = None
        with store_from_endpoint(endpoint, tmp_path / "manifests") as store:
            store.ensure_schema()
            store.write_batch([checkpoint("a")])
            assert [c.partition_id for c in store.list_latest(ROUTE)] == [checkpoint("a").partition_id]
        if expected_file is not None:
            assert expected_file.is_file()


# -- SQLite sharing between processes ------------------------------------------------------------------

_WRITER = """
import sys
from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
with SqlCheckpointStore(sys.argv[1]) as store:
    store.ensure_schema()
    store.write_batch([PartitionCheckpoint.from_payload(line) for line in sys.stdin.read().splitlines()])
"""


def test_sqlite_store_is_wal_and_fully_synced_and_shared_with_another_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    batch = [guarded(f"2026-12-0{i}", GuardPhase.ARMED) for i in range(1, 4)]
    with SqlCheckpointStore(url) as reader:
        reader.ensure_schema()
        assert reader.list_latest(ROUTE) == []  # the reader's pooled connection stays open meanwhile
        writer = subprocess.run(
            [sys.executable, "-c", _WRITER, url],
            input="\n".join(c.to_payload() for c in batch),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert writer.returncode == 0, writer.stderr[-2000:]
        assert reader.list_latest(ROUTE) == batch
    (mode,) = raw_rows(url, "PRAGMA journal_mode")
    assert mode[0] == "wal"
    # per-connection settings, so read back through the store's own pool
    with SqlCheckpointStore(url) as store, store._engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL: commits survive power loss
        assert (conn.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0) >= 1000


# -- failures and secrets ------------------------------------------------------------------------------

SECRET = "s3cr3t-" + uuid.uuid4().hex


def test_the_routes_of_a_target_are_read_from_its_range_of_one_covering_index_which_an_older_store_gets(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    other_target = ROUTE.model_copy(update={"target_table": "analytics.other"})
    respelled = ROUTE.model_copy(update={"source_table": ROUTE.source_table.upper()})
    with SqlCheckpointStore(url) as store:
        store.ensure_schema()
        store.write_batch([checkpoint("2026-11-30")])
        store.write_batch(
            [checkpoint("2026-11-30").model_copy(update={"route": r}) for r in (other_target, respelled)]
        )
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # the store as a release before this index left it
        conn.execute(sa.text("DROP INDEX ix_dpone_partition_checkpoints_target_routes"))
    engine.dispose()
    with SqlCheckpointStore(url) as store:
        store.ensure_schema()
        assert store.list_routes(ROUTE.target_table) == sorted(
            [ROUTE, respelled], key=lambda r: r.source_table
        )
        assert store.list_routes(other_target.target_table) == [other_target]
        assert set(store.list_routes()) == {ROUTE, respelled, other_target}
        bound = store._select_routes_to.params(target_table=ROUTE.target_table)
        statement = str(bound.compile(dialect=store._engine.dialect, compile_kwargs={"literal_binds": True}))
    plan = " ".join(str(row[-1]) for row in raw_rows(url, "EXPLAIN QUERY PLAN " + statement))
    # no payload page and no other target's entries are read
    assert "COVERING INDEX ix_dpone_partition_checkpoints_target_routes (target_table=?)" in plan, plan


def assert_hides(error: DponeError, *secrets: str) -> None:
    rendered = [
        str(error),
        repr(error),
        error.render(),
        repr(error.to_json()),
        *traceback.format_exception(error),
    ]
    for secret in secrets:
        assert all(secret not in text for text in rendered), "a secret leaked into the error"


def test_postgres_failures_carry_the_store_code_and_never_the_password(postgres_url: str) -> None:
    closed_port = sa.engine.make_url(postgres_url).set(
        host="127.0.0.1", port=_unused_port(), username="dpone", password=SECRET
    )
    store = SqlCheckpointStore(closed_port.render_as_string(hide_password=False))
    try:
        assert SECRET not in repr(store)
        for call in (
            store.ensure_schema,
            lambda: store.write_batch([checkpoint("a")]),
            lambda: store.list_latest(ROUTE),
        ):
            with pytest.raises(DponeError) as caught:
                call()
            assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED
            assert caught.value.__cause__ is not None
            assert_hides(caught.value, SECRET)
    finally:
        store.close()


def test_a_postgres_store_built_from_an_endpoint_keeps_the_password_out_of_reprs_and_errors() -> None:
    endpoint = EndpointDescriptor(
        name="pg",
        kind=EndpointKind.POSTGRES,
        host="127.0.0.1",
        port=_unused_port(),
        database="x",
        user="dpone",
        password=SecretStr(SECRET),
    )
    with store_from_endpoint(endpoint) as store:
        assert SECRET not in repr(store)
        with pytest.raises(DponeError) as caught:
            store.ensure_schema()
        assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED
        assert_hides(caught.value, SECRET)


def test_sqlite_failures_carry_the_store_code_and_never_the_path(tmp_path: Path) -> None:
    secret_dir = tmp_path / SECRET
    secret_dir.mkdir()
    not_a_database = secret_dir / "state.sqlite"
    not_a_database.write_bytes(b"this is not a sqlite database file, " * 100)
    with SqlCheckpointStore(f"sqlite:///{not_a_database}") as store, pytest.raises(DponeError) as caught:
        store.ensure_schema()
    assert caught.value.code is ErrorCode.CHECKPOINT_STORE_FAILED
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.details)


@pytest.mark.parametrize(
    "template",
    [
        "mysql://u:{pw}@h/db",
        "postgresql+psycopg://u:{pw}@h/db",
        "not a url {pw}",
        "postgresql://u:{pw}@h:port/db",
        "nosuchdb+nodriver://u:{pw}@h/db",
    ],
    ids=["other-backend", "other-driver", "garbage", "bad-port", "unknown-dialect"],
)
def test_unsupported_or_malformed_urls_are_connection_errors_that_do_not_echo_the_url(template: str) -> None:
    with pytest.raises(DponeError) as caught:
        SqlCheckpointStore(template.format(pw=SECRET))
    assert caught.value.code is ErrorCode.CONNECTION_INVALID
    assert_hides(caught.value, SECRET)


def _unused_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_airflow_style_postgres_scheme_is_accepted_as_postgresql_psycopg2() -> None:
    with SqlCheckpointStore(f"postgres://dpone:{SECRET}@127.0.0.1:{_unused_port()}/x") as store:
        assert store.backend == "postgresql"
        assert SECRET not in repr(store)


def test_an_in_memory_sqlite_store_works_across_threads_for_quick_tools() -> None:
    with SqlCheckpointStore("sqlite://") as store:
        store.ensure_schema()
        writer = threading.Thread(target=store.write_batch, args=([checkpoint("a")],))
        writer.start()
        writer.join(timeout=30)
        assert store.list_latest(ROUTE) == [checkpoint("a")]
