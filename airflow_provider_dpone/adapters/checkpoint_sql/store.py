"""``SqlCheckpointStore``: the durable checkpoint and source-state store over SQLAlchemy Core.

One class serves SQLite (the embedded default) and PostgreSQL (production, shared by Airflow workers) with
the same tables, queries and behaviour (layout and payload design: see ``tables.py``).

* Append-only: checkpoints are only ever INSERTed. "Latest" is the highest ``id`` of a partition; ids come
  from the database's rowid/identity and each row commits before the next is written, so with one writer
  per target (the route lease, ``route_lease.py``) ``id`` order is write order.
* ``write_batch`` writes one row per short transaction, in order, deliberately NOT atomically: the target
  commit guard must be correct without atomic multi-row storage (seed 000), so a failure leaves the
  written prefix durable. A failure reported on COMMIT may still have made that row durable; callers
  reconcile by reading back (``read_latest``), never by trusting ``details["written"]``.
* Failures: every SQLAlchemy/driver error becomes ``checkpoint_store_failed`` chained from the original.
  Messages name the operation and backend only (never the URL, SQL or values). No retries: a store that
  is down should fail the attempt fast, and the guard makes the retry safe.
* Cheap writes: statements are built once (SQLAlchemy caches their compilation), one pooled connection
  serves a whole batch, and nothing is reflected per row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import Connection, Row, bindparam, func, inspect, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.schema import CreateIndex
from sqlalchemy.sql import Executable

from airflow_provider_dpone.adapters.checkpoint_sql.batch_sync import one_sync_per_batch
from airflow_provider_dpone.adapters.checkpoint_sql.route_lease import HeldFlock, postgres_lease, sqlite_lease
from airflow_provider_dpone.adapters.checkpoint_sql.store_base import SqlStoreBase
from airflow_provider_dpone.adapters.checkpoint_sql.tables import DEFINITIONS_TABLE, build_tables
from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import canonical_json
from airflow_provider_dpone.contracts.read_definition import ReadDefinition
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.unreadable import unreadable_checkpoint
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.runtime.collector import collector_paused

if TYPE_CHECKING:
    from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore, SourceStateStore
    from airflow_provider_dpone.ports.route_lease import LeaseHold, RouteLease

#: ensure_schema re-runs its IF-NOT-EXISTS DDL after losing a creation race to another process.
_SCHEMA_ATTEMPTS = 3
#: PostgreSQL SQLSTATEs a lost creation race raises: duplicate table/object, unique violation on pg_type.
_ALREADY_EXISTS_SQLSTATES = frozenset({"42P07", "42710", "23505"})
#: Partition IDs per IN list in read_latest (well below SQLite's oldest variable limit of 999).
_IN_CHUNK = 500


class SqlCheckpointStore(SqlStoreBase):
    """``CheckpointStore`` and ``SourceStateStore`` on one SQLite file or PostgreSQL database.

    ``url`` is a SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg2://...``), as text or a
    ``URL`` object; it is never kept as text or shown. ``clock`` supplies ``written_at``/``updated_at``
    (UTC wall clock by default); it never changes checkpoint payloads.
    """

    store_name = "checkpoint store"
    error_code = ErrorCode.CHECKPOINT_STORE_FAILED

    def __init__(self, url: str | URL, *, clock: Clock | None = None) -> None:
        super().__init__(url, clock=clock)
        self._tables = build_tables(self._backend)
        #: the table ``ensure_schema`` was creating when it failed (None: none)
        self._creating: str | None = None
        self._build_statements()

    def __enter__(self) -> SqlCheckpointStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- statements ----------------------------------------------------------------------------------

    def _build_statements(self) -> None:
        c = self._tables.checkpoints
        s = self._tables.source_state
        self._insert_checkpoint = c.insert()

        def latest_of(*extra: Any) -> Executable:
            # the latest id of each partition from the (route_key, partition_id, id) index alone, then those
            # rows by primary key: the IN list is walked in id order, so the rows come out in append order
            # without a sort (a join on the grouped ids sorted 50,000 payloads: 2x the time on SQLite)
            latest_ids = (
                select(func.max(c.c.id))
                .where(c.c.route_key == bindparam("route_key"), *extra)
                .group_by(c.c.partition_id)
            )
            return (
                select(c.c.id, c.c.partition_id, c.c.payload_text)
                .where(c.c.id.in_(latest_ids))
                .order_by(c.c.id)
            )

        self._select_latest = latest_of()
        self._select_latest_of = latest_of(c.c.partition_id.in_(bindparam("partition_ids", expanding=True)))
        self._select_history = (
            select(c.c.id, c.c.partition_id, c.c.payload_text)
            .where(c.c.route_key == bindparam("route_key"), c.c.partition_id == bindparam("partition_id"))
            .order_by(c.c.id)
        )
        self._select_routes = (
            select(c.c.source_table, c.c.target_table, c.c.strategy)
            .distinct()
            .order_by(c.c.source_table, c.c.target_table, c.c.strategy)
        )
        # the routes of one target: a range of the (target, source, strategy) index, whatever else is stored
        self._select_routes_to = (
            select(c.c.target_table, c.c.source_table, c.c.strategy)
            .where(c.c.target_table == bindparam("target_table"))
            .distinct()
            .order_by(c.c.target_table, c.c.source_table, c.c.strategy)
        )
        self._select_state = select(s.c.payload).where(s.c.route_key == bindparam("route_key"))
        insert = postgresql.insert if self._backend == "postgresql" else sqlite.insert
        upsert = insert(s)
        self._upsert_state = upsert.on_conflict_do_update(
            index_elements=[s.c.route_key],
            set_={"payload": upsert.excluded.payload, "updated_at": upsert.excluded.updated_at},
        )
        d = self._tables.definitions
        self._insert_definition = insert(d).on_conflict_do_nothing(
            index_elements=[d.c.route_key, d.c.query_hash]
        )
        self._select_definitions = select(d.c.query_hash, d.c.definition).where(
            d.c.route_key == bindparam("route_key"),
            d.c.query_hash.in_(bindparam("query_hashes", expanding=True)),
        )

    # -- CheckpointStore -------------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create the tables and indexes if missing; safe when several processes race to do it."""
        self._check_open("ensure_schema")
        for attempt in range(1, _SCHEMA_ATTEMPTS + 1):
            self._creating = None
            try:
                with self._engine.begin() as conn:
                    missing = self._create_if_missing(conn)
                break
            except self._db_errors as exc:
                if attempt < _SCHEMA_ATTEMPTS and _is_already_exists(exc):
                    continue  # another process created an object between our check and our CREATE
                raise self._schema_failure(exc) from exc
        if missing:
            raise DponeError(
                ErrorCode.CHECKPOINT_STORE_FAILED,
                f"checkpoint store tables on {self._backend} exist but lack required columns",
                details={"operation": "ensure_schema", "backend": self._backend, "missing_columns": missing},
            )

    def _create_if_missing(self, conn: Connection) -> list[str]:
        """Create what is missing, and only that; the columns a pre-existing table lacks stop before its
        indexes. PostgreSQL checks a ``CREATE ... IF NOT EXISTS``'s privileges before it looks, so a role
        that may write rows but does not own the tables (made by an admin, a store restored with
        ``--no-owner``, another team's role) failed every run. A table is looked for where the
        connection's statements find it (PostgreSQL's search_path): a schema put before it later (a
        per-user schema) made a second, empty store there."""
        tables = (self._tables.checkpoints, self._tables.source_state, self._tables.definitions)
        schemas: dict[str, str | None] = {}
        for table in tables:
            found, schema = self._table_found(conn, table.name)
            if not found:
                self._creating = table.name
                self._create_table(conn, table)
                self._creating = None
                schema = self._table_found(conn, table.name)[1]
            schemas[table.name] = schema
        inspector = inspect(conn)
        missing: list[str] = []
        for table in tables:
            present = {
                column["name"] for column in inspector.get_columns(table.name, schema=schemas[table.name])
            }
            missing.extend(f"{table.name}.{col.name}" for col in table.columns if col.name not in present)
        if not missing:
            for table in tables:
                indexed = {ix["name"] for ix in inspector.get_indexes(table.name, schema=schemas[table.name])}
                for index in sorted(table.indexes, key=lambda ix: str(ix.name)):
                    if index.name not in indexed:
                        conn.execute(CreateIndex(index, if_not_exists=True))
        if self._backend == "postgresql" and not missing:
            self._require_ids_ahead(conn)
        return missing

    def _schema_failure(self, exc: BaseException) -> DponeError:
        """``ensure_schema``'s failure; creating the definitions table a store made by an earlier release
        lacks names that table, and what its role needs (``CREATE`` on the schema, once)."""
        creating, self._creating = self._creating, None
        if creating != DEFINITIONS_TABLE:
            return self._failure("ensure_schema", exc)
        failure = self._failure("ensure_schema", exc, table=creating)
        return DponeError(
            failure.code,
            failure.safe_message + f": creating table {creating}, which this release adds to the store",
            details=failure.details,
            hint_lines=(
                "nothing was read or written; the route is not blocked",
                f"run dpone once with a role that may create tables in the store's schema (it creates {creating} "
                "beside dpone_partition_checkpoints), or have the tables' owner create it; then grant this role "
                "SELECT and INSERT on it",
                "see the connections guide, 'The store's role and schema (PostgreSQL)'",
            ),
        )

    def _require_ids_ahead(self, conn: Connection) -> None:
        """The latest checkpoint is the one of the highest id: a store copied without its id sequence (a
        logical copy, ``pg_restore -t``) handed out ids below the rows it holds, so an operator's resolution
        reported success under a lower id and the route stayed blocked. Stop before any write instead."""
        name = self._tables.checkpoints.name
        sequence = conn.execute(text("SELECT pg_get_serial_sequence(:name, 'id')"), {"name": name}).scalar()
        highest = conn.execute(text(f"SELECT max(id) FROM {name}")).scalar()
        if sequence is None or highest is None:
            return
        # USAGE on the sequence is enough for both (the store's documented grants)
        seq = {"seq": sequence}
        last = conn.execute(text("SELECT pg_sequence_last_value(CAST(:seq AS regclass))"), seq).scalar()
        if last is None:  # set and not used since (a fresh copy, setval(..., false)): take one id to see
            next_id = conn.execute(text("SELECT nextval(CAST(:seq AS regclass))"), seq).scalar()
        else:
            next_id = last + 1
        if next_id <= highest:
            raise DponeError(
                ErrorCode.CHECKPOINT_STORE_FAILED,
                "the checkpoint table's id sequence is behind its rows (a store copied without its sequence): "
                "new checkpoints would not be the latest; nothing was written",
                details={
                    "operation": "ensure_schema",
                    "backend": self._backend,
                    "problem": "id_sequence_behind",
                },
                hint_lines=(
                    "runbook:  dpone runbook guard (section 'A checkpoint store copied without its id sequence')",
                ),
            )

    def write_batch(self, checkpoints: Sequence[PartitionCheckpoint]) -> None:
        """Append each checkpoint in order, each in its own transaction (a failure leaves a prefix)."""
        self._check_open("write_batch")
        rows = [_row_of(checkpoint) for checkpoint in checkpoints]
        if not rows:
            return
        written = 0
        try:
            # AUTOCOMMIT: each INSERT is its own transaction, committed by the database when the statement
            # returns — one round trip a row instead of BEGIN, INSERT, COMMIT (guard overhead per partition)
            # One fsync for the whole batch on SQLite: the last row's commit syncs every row before it
            # (batch_sync.py); the batch is on disk when this returns, as before.
            with (
                self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
                one_sync_per_batch(conn, self._backend, len(rows)) as sync_from_now,
            ):
                for row in rows:
                    if written == len(rows) - 1:
                        sync_from_now()
                    conn.execute(self._insert_checkpoint, {**row, "written_at": self._now()})
                    written += 1
        except self._db_errors as exc:
            failed = checkpoints[min(written, len(rows) - 1)]
            raise self._failure(
                "write_batch",
                exc,
                route=failed.route.describe(),
                partition_id=failed.partition_id if written < len(rows) else None,
                written=written,
                batch_size=len(rows),
            ) from exc

    def list_latest(self, route: RouteIdentity) -> list[PartitionCheckpoint]:
        """Latest checkpoint of every partition of the route (one query), in append order."""
        with collector_paused():
            rows = self._fetch("list_latest", route, self._select_latest, {"route_key": route.key()})
            return self._parse_all(rows, route)

    def list_routes(self, target_table: str | None = None) -> list[RouteIdentity]:
        """Every route the table holds checkpoints of, as stored (older releases stored raw spellings);
        with ``target_table``, those writing it (a range of one index, however many other routes there are)."""
        self._check_open("list_routes")
        with self._translated("list_routes"), self._engine.connect() as conn:
            if target_table is None:
                rows = conn.execute(self._select_routes).all()
            else:
                rows = conn.execute(self._select_routes_to, {"target_table": target_table}).all()
        routes: list[RouteIdentity] = []
        for row in rows:
            try:
                strategy = Strategy(row.strategy)
                routes.append(
                    RouteIdentity(
                        source_table=row.source_table, target_table=row.target_table, strategy=strategy
                    )
                )
            except (ValueError, ValidationError):
                continue  # not a route this release can read; its rows are never read as checkpoints
        return routes

    def read_latest(
        self, route: RouteIdentity, partition_ids: Sequence[str]
    ) -> dict[str, PartitionCheckpoint]:
        """Latest checkpoint of each named partition that has one."""
        wanted = list(dict.fromkeys(partition_ids))
        found: dict[str, PartitionCheckpoint] = {}
        for start in range(0, len(wanted), _IN_CHUNK):
            params = {"route_key": route.key(), "partition_ids": wanted[start : start + _IN_CHUNK]}
            rows = self._fetch("read_latest", route, self._select_latest_of, params)
            found.update((c.partition_id, c) for c in self._parse_all(rows, route))
        return found

    def history(self, route: RouteIdentity, partition_id: str) -> list[PartitionCheckpoint]:
        """Every checkpoint written for one partition, oldest first."""
        params = {"route_key": route.key(), "partition_id": partition_id}
        rows = self._fetch("history", route, self._select_history, params)
        return self._parse_all(rows, route)

    def record_definition(self, route: RouteIdentity, definition: ReadDefinition) -> None:
        """Keep ``definition`` under (route, its query hash): one insert that does nothing when the key is
        taken (a row is never changed). The failure names the operation and route, never the definition."""
        self._check_open("record_definition")
        params = {
            "route_key": route.key(),
            "query_hash": definition.query_hash(),
            "definition": definition.canonical_text(),
            "written_at": self._now(),
        }
        try:
            with self._engine.connect() as conn:
                conn.execute(self._insert_definition, params)
                conn.commit()
        except self._db_errors as exc:
            raise self._definitions_failure("record_definition", exc, route) from exc

    def read_definitions(
        self, route: RouteIdentity, query_hashes: Sequence[str]
    ) -> dict[str, ReadDefinition]:
        """The definitions kept for ``route`` among ``query_hashes`` (one query per 500 hashes); a row that
        is no valid definition or does not hash to its key is left out, as if never kept."""
        self._check_open("read_definitions")
        wanted = list(dict.fromkeys(query_hashes))
        found: dict[str, ReadDefinition] = {}
        for start in range(0, len(wanted), _IN_CHUNK):
            params = {"route_key": route.key(), "query_hashes": wanted[start : start + _IN_CHUNK]}
            try:
                with self._engine.connect() as conn:
                    rows = conn.execute(self._select_definitions, params).all()
            except self._db_errors as exc:
                raise self._definitions_failure("read_definitions", exc, route) from exc
            for row in rows:
                try:
                    definition = ReadDefinition.from_text(row.definition)
                except ValidationError:
                    continue
                if definition.query_hash() == row.query_hash:
                    found[row.query_hash] = definition
        return found

    def _definitions_failure(self, operation: str, exc: BaseException, route: RouteIdentity) -> DponeError:
        """A failure to read or keep a definition names the table; where the role lacks a privilege on it (the
        owner's run created it after the role's grants on the schema's tables were given), what to grant,
        as ``ensure_schema``'s failure to create it does. Seen: every ``replace_partition`` run of such a
        role stopped with only "operation read_definitions failed (InsufficientPrivilege)"."""
        failure = self._failure(operation, exc, route=route.describe(), table=DEFINITIONS_TABLE)
        if not _denied(exc):
            return failure
        needs = "SELECT" if operation == "read_definitions" else "INSERT"
        return DponeError(
            failure.code,
            failure.safe_message + f": this role may not {needs} on table {DEFINITIONS_TABLE}, which this "
            "release adds to the store (a replacing route keeps its read definitions there)",
            details=failure.details,
            hint_lines=(
                "nothing was written to the target or the checkpoints; the route is not blocked",
                f"have the tables' owner grant this role SELECT and INSERT on {DEFINITIONS_TABLE} (grants on "
                "ALL TABLES IN SCHEMA given before the table was created do not cover it), then run again",
                "see the connections guide, 'The store's role and schema (PostgreSQL)'",
            ),
        )

    # -- RouteLease ------------------------------------------------------------------------------------

    def lease(self, key: str) -> AbstractContextManager[LeaseHold]:
        """Exclusive for the run, released by process death (see ``route_lease``)."""
        self._check_open("lease")
        if self._backend == "postgresql":
            return postgres_lease(self._engine, key)
        database = self._engine.url.database
        if not database or database == ":memory:":
            return nullcontext(HeldFlock())  # a private in-memory store: no other process can share it
        return sqlite_lease(Path(database), key)

    # -- SourceStateStore ------------------------------------------------------------------------------

    def read_state(self, route: RouteIdentity) -> dict[str, object] | None:
        rows = self._fetch("read_state", route, self._select_state, {"route_key": route.key()})
        if not rows:
            return None
        try:
            state = json.loads(rows[0].payload)
        except ValueError as exc:
            raise self._unreadable("read_state", route, None) from exc
        if not isinstance(state, dict):
            raise self._unreadable("read_state", route, None)
        return state

    def advance_state(self, route: RouteIdentity, state: Mapping[str, object]) -> None:
        """Insert or replace the route's state (call only after the commit it describes is durable)."""
        self._check_open("advance_state")
        try:
            payload = canonical_json(dict(state))
        except (TypeError, ValueError) as exc:
            raise DponeError(
                ErrorCode.CHECKPOINT_STORE_FAILED,
                "source state is not JSON-serializable",
                details={"operation": "advance_state", "route": route.describe()},
            ) from exc
        params = {"route_key": route.key(), "payload": payload, "updated_at": self._now()}
        with self._translated("advance_state", route=route.describe()), self._engine.connect() as conn:
            conn.execute(self._upsert_state, params)
            conn.commit()

    # -- internals -------------------------------------------------------------------------------------

    def _now(self) -> datetime:
        now = self._clock.now() if self._clock is not None else datetime.now(timezone.utc)
        return now.astimezone(timezone.utc)

    def _fetch(
        self, operation: str, route: RouteIdentity, statement: Executable, params: dict[str, Any]
    ) -> Sequence[Row[Any]]:
        self._check_open(operation)
        with self._translated(operation, route=route.describe()), self._engine.connect() as conn:
            return conn.execute(statement, params).all()

    @staticmethod
    def _parse_all(rows: Sequence[Row[Any]], route: RouteIdentity) -> list[PartitionCheckpoint]:
        """The stored checkpoints, each validated strictly. A payload that is invalid or disagrees with
        its row (route or partition) becomes an unreadable stand-in, which blocks the route as an invalid
        guard and can be resolved. One tight loop: a route scan parses tens of thousands of rows, so the
        model's validator is called directly (what ``from_payload`` calls, less two Python frames a row:
        ~15% of parsing 50,000 payloads)."""
        parse = PartitionCheckpoint.__pydantic_validator__.validate_json
        expected = (route.source_table, route.target_table, route.strategy)
        parsed: list[PartitionCheckpoint] = []
        append = parsed.append
        for row_id, partition_id, payload_text in rows:  # type: ignore[misc]  # (id, partition_id, payload_text)
            try:
                checkpoint = parse(payload_text)
            except ValidationError:
                append(unreadable_checkpoint(partition_id, route, row_id, payload_text))
                continue
            stored = checkpoint.route  # field by field: the same as ==, a fifth of its cost
            if (
                stored.source_table,
                stored.target_table,
                stored.strategy,
            ) != expected or checkpoint.partition_id != partition_id:
                append(unreadable_checkpoint(partition_id, route, row_id, payload_text))
                continue
            append(checkpoint)
        return parsed

    def _unreadable(self, operation: str, route: RouteIdentity, row: Row[Any] | None) -> DponeError:
        details: dict[str, Any] = {
            "operation": operation,
            "backend": self._backend,
            "route": route.describe(),
        }
        if row is not None:
            details.update(partition_id=row.partition_id, checkpoint_row_id=row.id)
        return DponeError(
            ErrorCode.CHECKPOINT_STORE_FAILED,
            f"a stored record on {self._backend} is not a valid {'state' if row is None else 'checkpoint'}",
            details=details,
        )


#: SQLSTATE of a statement the role may not run (PostgreSQL's ``insufficient_privilege``).
_DENIED = "42501"


def _denied(exc: BaseException) -> bool:
    """Whether the driver says the role lacks a privilege (psycopg2's ``pgcode``, psycopg's ``sqlstate``)."""
    cause = getattr(exc, "orig", None) or exc
    return _DENIED in (getattr(cause, "pgcode", None), getattr(cause, "sqlstate", None))


def _row_of(checkpoint: PartitionCheckpoint) -> dict[str, Any]:
    """Column values of one checkpoint row, minus ``written_at`` (stamped at write time)."""
    try:
        payload = checkpoint.to_payload()
    except ValueError as exc:  # e.g. NaN in diagnostics: refused before anything of the batch is written
        raise DponeError(
            ErrorCode.CHECKPOINT_STORE_FAILED,
            "a checkpoint cannot be serialized to canonical JSON",
            details={"operation": "write_batch", "partition_id": checkpoint.partition_id},
        ) from exc
    route = checkpoint.route
    return {
        "route_key": route.key(),
        "source_table": route.source_table,
        "target_table": route.target_table,
        "strategy": route.strategy.value,
        "partition_id": checkpoint.partition_id,
        "run_id": checkpoint.run_id,
        "status": checkpoint.status.value,
        "payload_text": payload,
    }


def _is_already_exists(exc: BaseException) -> bool:
    """Whether a DDL error is the loser's side of a creation race (as opposed to a real failure)."""
    cause = getattr(exc, "orig", None) or exc
    if getattr(cause, "pgcode", None) in _ALREADY_EXISTS_SQLSTATES:
        return True
    return "already exists" in str(cause)


if TYPE_CHECKING:

    def _conforms(store: SqlCheckpointStore) -> tuple[CheckpointStore, SourceStateStore, RouteLease]:
        return store, store, store
