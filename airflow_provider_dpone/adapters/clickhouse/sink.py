"""The ClickHouse target: ``Sink`` and ``StagedSink`` over one endpoint (server over HTTP, or chDB).

Every mutating call (``load``, ``finalize_staged_load``) checks its permit first, then validates every
input it can (bounds, columns, the first chunk) before the first statement that changes the target, so
a refusal writes nothing. Failures are ``DponeError``s with safe messages, chained from the original.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError
from clickhouse_connect.driver.insert import InsertContext

from airflow_provider_dpone.adapters.clickhouse.arrow_insert import arrow_table
from airflow_provider_dpone.adapters.clickhouse.calendar_limits import outside_limits
from airflow_provider_dpone.adapters.clickhouse.client import close_client, failure_details, open_client
from airflow_provider_dpone.adapters.clickhouse.column_encoders import (
    MODERN_LIMITS,
    column_types,
    insert_columns,
    value_limits,
)
from airflow_provider_dpone.adapters.clickhouse.comparable_bounds import bound_limits, require_comparable
from airflow_provider_dpone.adapters.clickhouse.detached_parts import detached_parts
from airflow_provider_dpone.adapters.clickhouse.file_names import (
    StoredColumn,
    require_storable_column_names,
    stored_columns,
)
from airflow_provider_dpone.adapters.clickhouse.insert_context import insert_context, release_block
from airflow_provider_dpone.adapters.clickhouse.insert_settings import (
    plain_insert_settings,
    require_plain_inserts,
)
from airflow_provider_dpone.adapters.clickhouse.key_fingerprints import statement as fingerprint_statement
from airflow_provider_dpone.adapters.clickhouse.mutations import MutationTimeout, delete_where
from airflow_provider_dpone.adapters.clickhouse.native_body import native_body
from airflow_provider_dpone.adapters.clickhouse.predicates import (
    BoundsError,
    any_of,
    delete_conditions,
    where_clause,
)
from airflow_provider_dpone.adapters.clickhouse.quoting import (
    TableName,
    driver_misquotes,
    quote_identifier,
    quote_string,
)
from airflow_provider_dpone.adapters.clickhouse.staged_publish import attach_statement, attachable_partitions
from airflow_provider_dpone.adapters.clickhouse.statements_in_flight import (
    delete_marker,
    in_flight,
    pending_mutations,
    tagged,
    target_tag,
)
from airflow_provider_dpone.adapters.clickhouse.table_schema import (
    COLUMN_TTL,
    MISSING_COLUMN_HINT,
    MISSING_FROM_TARGET,
    TargetColumn,
    column_list,
    columns_refusing_null,
    compatibility_problems,
    create_staging_sql,
    create_table_sql,
    holds_null,
    strip_nullable,
    types_compatible,
)
from airflow_provider_dpone.adapters.clickhouse.target_engine import (
    TTL_ALREADY_EXPIRED,
    require_row_keeping_engine,
    rows_dropping_ttl,
    table_facts,
)
from airflow_provider_dpone.adapters.clickhouse.target_pin import (
    LoadScope,
    TablePin,
    changed_columns,
    has_table_uuids,
    own_mutations,
    read_pin,
    table_changed_error,
    types_changed_error,
    what_changed,
)
from airflow_provider_dpone.adapters.clickhouse.target_views import fed_views, require_views_fed_once
from airflow_provider_dpone.adapters.sources.arrow_column import join_columns
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.detached_part import DetachedPart
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.key_fingerprint import (
    KeyFingerprint,
    MalformedFingerprint,
    fingerprints_from_rows,
)
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema, require_column
from airflow_provider_dpone.ports.source import ValueLimits

log = logging.getLogger(__name__)

#: Staging tables live beside their target as ``<db>._dpone_stage_<16 hex>``; nothing else is ever dropped.
STAGING_PREFIX = "_dpone_stage_"
#: How long a partition delete may take on servers without ``mutations_sync`` (ClickHouse 18.16).
DEFAULT_MUTATION_TIMEOUT_S = 600.0
#: Small chunks (day partitions of a few thousand rows, partition tails) are merged into one insert of up
#: to this many rows (and cells): every insert is a request and a new part on the server, about 10-20 ms
#: each here, so 60 one-day inserts cost ~0.6 s more than 20 full ones. A chunk this large or larger is
#: inserted as it is; the first chunk of a load is always inserted at once, so a target that refuses the
#: data fails before more of the source is read.
INSERT_BLOCK_ROWS = 50_000
INSERT_BLOCK_CELLS = 1_000_000
#: A merged block never grows past this many rows: a chunk that would carry it over is inserted after the
#: block, not in it, so the rows an insert holds stay bounded by ``chunk_rows`` however the partitions fall
#: (a partition tail of 33k rows beside the next partition's 50k chunk was one insert of 83k). The slack
#: over ``INSERT_BLOCK_ROWS`` lets near-equal small chunks (three days of 16,667 rows) still fill a block.
INSERT_BLOCK_MAX_ROWS = 60_000
#: ...and never holds more chunks than this. A chunk of the Arrow read keeps its driver batch's buffers,
#: sized for a whole batch whatever it holds (~115 KB for a one-row day), so a block of one-row partitions
#: merged toward 50,000 rows held every one of them: peak memory grew by ~115 KB a partition (1.4-1.7 GB
#: for 30 years of days).
INSERT_BLOCK_MAX_CHUNKS = 128


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a strategy removes before the insert: nothing, everything, or the rows matching ``condition``."""

    truncate: bool = False
    #: the armed partitions whose rows are deleted; the condition is written once the column types are known
    bounds: tuple[PartitionBounds, ...] = ()


class ClickHouseSink:
    """One endpoint's target tables. The client opens on first use and reopens after :meth:`close`,
    so a caller can release a chDB path (e.g. for a reader process) and keep using the sink afterwards."""

    def __init__(
        self,
        endpoint: EndpointDescriptor,
        *,
        mutation_timeout_s: float = DEFAULT_MUTATION_TIMEOUT_S,
        allow_ttl: bool = False,
        views_refused_for: Strategy | None = None,
        deletes_rows: bool = False,
    ) -> None:
        """``allow_ttl``: the manifest's ``sink.options.allow_target_ttl`` (a target with a deleting TTL is
        refused before arming without it; ADR 0083). ``views_refused_for``: the strategy of a route that
        replaces rows and may not feed materialized views (ADR 0086); ``None``: views are not checked.
        ``deletes_rows``: the route deletes the rows of its partitions (``replace_partition``): a mutation
        of the target still pending is refused before arming (the delete would queue behind it)."""
        self._endpoint = endpoint
        self._mutation_timeout_s = mutation_timeout_s
        self._allow_ttl = allow_ttl
        self._views_refused_for = views_refused_for
        self._deletes_rows = deletes_rows
        self._conn: Client | None = None
        #: the ``query_id`` prefix of the statements of the target change in progress (statements_in_flight)
        self._tag: str | None = None
        #: whether the engine's ``system.tables`` has ``uuid`` (``target_pin``), read once
        self._table_uuids: bool | None = None

    # -- connection --------------------------------------------------------------------------------

    def _client(self) -> Client:
        if self._conn is None:
            self._conn = open_client(self._endpoint)
        return self._conn

    def close(self) -> None:
        """Idempotent and never raises: the chDB path is released even when closing fails."""
        client, self._conn = self._conn, None
        close_client(client)

    def __enter__(self) -> ClickHouseSink:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- read-only ---------------------------------------------------------------------------------

    def table_exists(self, table: str) -> bool:
        name = self._name(table)
        with self._failures("check whether the table exists", name, step="exists"):
            return self._exists(self._client(), name)

    def value_limits(self) -> ValueLimits:
        """The calendar range this target holds exactly: chDB is a current engine (its path is not opened
        for this), a server is asked its version."""
        if self._endpoint.interface is ClickHouseInterface.CHDB:
            return MODERN_LIMITS
        return value_limits(self._client().server_version)

    def _require_within_limits(
        self,
        name: TableName,
        names: Sequence[str],
        type_names: Sequence[str],
        data: Sequence[Sequence[object]],
    ) -> None:
        """On a target narrower than its types (18.16), every block's dates within its range: a value that
        reached the source after the pre-arm audit was stored as 1970-01-01, exit 0 (``calendar_limits``)."""
        limits = self.value_limits()
        if limits is MODERN_LIMITS:
            return
        outside = outside_limits(type_names, data, limits)
        if outside is None:
            return
        index, low, high = outside
        raise DponeError(
            ErrorCode.TARGET_LOAD_FAILED,
            f"column {names[index]!r} ({type_names[index]}) received values outside the range target table "
            f"{name} holds ({low} .. {high}), which the value audit before arming did not see: the source "
            "changed while this run read it; this block was not written",
            details={"table": str(name), "column": names[index], "reason": "outside_target_range"},
            hint_lines=("correct the source rows, or convert or filter them in source.query",),
        )

    def require_bounds_comparable(
        self, table: str, schema: TableSchema, bounds: Sequence[PartitionBounds]
    ) -> None:
        """Before arming: every calendar bound of ``bounds`` is a literal this target compares exactly in
        ``schema``'s column types (``comparable_bounds``: the last day or month of a type's range is not)."""
        limits = self.value_limits()
        types = {column.name: column.clickhouse_type for column in schema.columns}
        require_comparable(bounds, types, bound_limits(limits, legacy=limits is not MODERN_LIMITS), table)

    def count_rows(self, table: str, bounds: PartitionBounds | None) -> int:
        """Rows within the bounds; 0 when the table does not exist yet (nothing was ever loaded)."""
        name = self._name(table)
        self._where(bounds)  # malformed bounds fail before any statement
        with self._failures("count rows in the target table", name, step="count"):
            client = self._client()
            if not self._exists(client, name):
                return 0
            where = self._where(bounds, _types_of(self._describe(client, name)))
            return int(client.query(f"SELECT count() FROM {name.sql()}{where}").result_rows[0][0])

    def count_rows_each(self, table: str, bounds: Sequence[PartitionBounds]) -> list[int]:
        """``GroupedCountingSink``: rows within each of ``bounds`` (pairwise disjoint) in one statement, the
        fingerprint's of no key column (``key_fingerprints``: its ``count()`` under each bounds' predicate,
        the one ``count_rows`` uses); 0 each when the table does not exist yet."""
        found = self._grouped(table, bounds, (), "count rows in", "row counts")
        return [0] * len(bounds) if found is None else [one.rows for one in found]

    def key_fingerprints(
        self, table: str, bounds: Sequence[PartitionBounds], columns: Sequence[str]
    ) -> list[KeyFingerprint] | None:
        """``KeyFingerprintingSink``: one grouped statement over the batch (see ``key_fingerprints``);
        ``None`` when the table does not exist."""
        return self._grouped(table, bounds, columns, "fingerprint the keys of", "key fingerprints")

    def _grouped(
        self, table: str, bounds: Sequence[PartitionBounds], columns: Sequence[str], doing: str, what: str
    ) -> list[KeyFingerprint] | None:
        """The fingerprint statement over ``bounds`` (``columns``: none for counts alone), read-only; ``None``
        when the table does not exist. ``doing``/``what`` name the step in a failure."""
        name = self._name(table)
        for one in bounds:
            self._where(one)  # malformed bounds fail before any statement
        with self._failures(f"{doing} the target table", name, step="count"):
            client = self._client()
            if not self._exists(client, name):
                return None
            types = _types_of(self._describe(client, name))
            try:
                text = fingerprint_statement(name.sql(), bounds, columns, types)
            except BoundsError as exc:
                raise _bounds_error(exc, bounds[0] if bounds else None) from None
            rows = client.query(text).result_rows
        try:
            return fingerprints_from_rows(rows, len(bounds), len(columns))
        except MalformedFingerprint as exc:
            raise DponeError(
                ErrorCode.TARGET_LOAD_FAILED,
                f"the {what} of target table {name} are not exact integers",
                details={"table": str(name), "step": "count"},
            ) from exc

    def require_no_writes_in_flight(self, table: str) -> None:
        """Read-only, before an operator's decision on counts: no statement dpone sent to change ``table``
        is still running on the server, and no delete of dpone's is pending (``statements_in_flight``)."""
        name = self._name(table)
        with self._failures("look for statements still running on the target table", name, step="count"):
            found = in_flight(self._client(), name)
        if not found.any:
            return
        raise DponeError(
            ErrorCode.ROUTE_BUSY,
            f"target table {name} is still being changed on the server ({found.statements} statement(s) "
            f"dpone sent running, {found.mutations} of its deletes pending): its row counts are not final, so nothing "
            "was resolved",
            details={
                "table": str(name),
                "statements_running": found.statements,
                "mutations_pending": found.mutations,
                "query_id_prefix": target_tag(name),
            },
            hint_lines=(
                "a killed or timed-out run's statement goes on writing (or its delete on deleting) on the "
                "server; resolving now could count none of its rows and let the next run load them a second "
                "time. --force does not pass this",
                "wait for it to end (system.processes; its delete in system.mutations) and resolve again",
                "or stop a publish first: KILL QUERY WHERE query_id LIKE "
                f"'{target_tag(name)}%' SYNC (an insert still receiving its rows may refuse to be killed on "
                "older servers: wait for it)",
                "see `dpone runbook guard`, '1. Inspect'",
            ),
        )

    def column_summary(
        self, table: str, bounds: PartitionBounds | None, columns: Sequence[str]
    ) -> dict[str, Any]:
        """Exact metrics for quality checks: ``rows``, and per column ``null_counts`` and
        ``distinct_counts`` (``uniqExact``; NULL is not a distinct value)."""
        name = self._name(table)
        self._where(bounds)  # malformed bounds fail before any statement
        selects = ["count()"]
        for column in columns:
            quoted = quote_identifier(column)
            selects += [f"countIf(isNull({quoted}))", f"uniqExact({quoted})"]
        with self._failures("summarize the target table", name, step="summary"):
            client = self._client()
            where = self._where(bounds, _types_of(self._describe(client, name)))
            row = client.query(f"SELECT {', '.join(selects)} FROM {name.sql()}{where}").result_rows[0]
        # 18.16 returns NULL (not 0) for uniqExact over only NULLs
        values = [int(v) if v is not None else 0 for v in row]
        return {
            "rows": values[0],
            "null_counts": {c: values[1 + 2 * i] for i, c in enumerate(columns)},
            "distinct_counts": {c: values[2 + 2 * i] for i, c in enumerate(columns)},
        }

    # -- target preparation (writes no rows) ---------------------------------------------------------

    def check_target(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> None:
        """Read-only: what :meth:`prepare_target` would refuse (``CheckingSink``); creates nothing."""
        name = self._refusals_before_statements(table, schema, order_by)
        with self._failures("read the target table", name, step="prepare"):
            client = self._client()
            require_plain_inserts(client, self._endpoint, str(name))
            target = self._describe(client, name) if self._exists(client, name) else None
            self._require_storable_names(client, name, schema, target)
            if target is not None:
                self._require_rows_kept(client, name)
        if target is not None:
            self._require_compatible(name, schema, target)

    def target_schema(self, table: str) -> TableSchema | None:
        """``DescribingSink``: the insertable columns of ``table`` as a schema (``Nullable`` unwrapped)."""
        name = TableName.parse(table)
        with self._failures("read the target table", name, step="prepare"):
            client = self._client()
            target = self._describe(client, name) if self._exists(client, name) else None
        if target is None:
            return None
        return TableSchema(
            columns=tuple(
                ColumnSpec(
                    name=c.name,
                    clickhouse_type=strip_nullable(_without_low_cardinality(c.type_name)),
                    nullable=holds_null(c.type_name),
                )
                for c in target.values()
                if c.insertable
            )
        )

    def deleting_ttl(self, table: str) -> bool:
        """``TtlReportingSink``: whether ``table``'s table TTL deletes rows or changes values
        (``target_engine.rows_dropping_ttl``, whatever ``allow_target_ttl`` says), from one read of its
        ``system.tables`` row; ``False`` when it does not exist."""
        name = self._name(table)
        with self._failures("read the target table", name, step="prepare"):
            found = table_facts(self._client(), name)
        return found is not None and rows_dropping_ttl(found.engine_full)

    def detached_parts(self, table: str) -> list[DetachedPart] | None:
        """``DetachedListingSink``: the parts detached from ``table`` (``detached_parts``; None on 18.16)."""
        name = self._name(table)
        with self._failures("list the parts detached from the target table", name, step="prepare"):
            # chDB is a current engine; a server is asked (18.16 has no system.detached_parts)
            listable = True if self._endpoint.interface is ClickHouseInterface.CHDB else None
            return detached_parts(self._client(), name, listable=listable)

    def views_fed_by(self, table: str) -> list[str]:
        """``ViewListingSink``: the views an insert into ``table`` feeds (``target_views.fed_views``)."""
        name = TableName.parse(table)
        with self._failures("read the target table", name, step="prepare"):
            client = self._client()
            found = table_facts(client, name)
            return [] if found is None else fed_views(client, found.dependents)

    def columns_refusing_null(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> list[str]:
        """Read-only (``NullRefusingSink``): the nullable source columns the existing target declares
        without ``Nullable`` (``table_schema.columns_refusing_null``); ``[]`` before the table exists. What
        ``prepare_target`` refuses before its first statement is refused first: the target stays unopened."""
        name = self._refusals_before_statements(table, schema, order_by)
        with self._failures("read the target table", name, step="prepare"):
            client = self._client()
            target = self._describe(client, name) if self._exists(client, name) else None
        return [] if target is None else columns_refusing_null(schema, target)

    def prepare_target(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> None:
        name = self._refusals_before_statements(table, schema, order_by)
        with self._failures("prepare the target table", name, step="prepare"):
            client = self._client()
            require_plain_inserts(client, self._endpoint, str(name))
            client.command(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(name.database)}")
            if not self._exists(client, name):
                self._require_storable_names(client, name, schema, None)
                client.command(
                    create_table_sql(
                        name,
                        schema,
                        order_by,
                        nullable_key_setting=self._nullable_key(client, schema, order_by),
                    )
                )
                log.info("created target table %s", name)
            target = self._describe(client, name)
            self._require_storable_names(client, name, schema, target)
            self._require_rows_kept(client, name)
        # compared even right after creation: another writer may have created it first
        self._require_compatible(name, schema, target)

    @staticmethod
    def _require_storable_names(
        client: Client, name: TableName, schema: TableSchema, target: Mapping[str, TargetColumn] | None
    ) -> None:
        """The route's columns as dpone creates them (no partition key), or every column the existing table
        keeps files of (a hand-made table's own columns and partition key too)."""
        if target is None:
            columns = [
                StoredColumn(c.name, f"Nullable({c.clickhouse_type})" if c.nullable else c.clickhouse_type)
                for c in schema.columns
            ]
        else:
            kept = [
                (c.name, c.type_name) for c in target.values() if c.default_kind not in ("ALIAS", "EPHEMERAL")
            ]
            columns = stored_columns(client, name, kept)
        require_storable_column_names(client, name, columns)

    def _require_rows_kept(self, client: Client, name: TableName) -> None:
        """Read-only, before arming, from one read of the table's ``system.tables`` row: its engine and TTL
        keep every row it is given (ADR 0083), and a replacing route feeds no view twice (ADR 0086). The
        table was just described, so a listing without it stops the run (ADR 0094, addendum: an answer cut
        to nothing had skipped every check here)."""
        found = table_facts(client, name)
        if found is None:  # the table was just described: the listing lost it, so nothing was checked
            raise OperationalError("system.tables does not list a table just described")
        require_row_keeping_engine(found, name, allow_ttl=self._allow_ttl)
        require_views_fed_once(client, name, found.dependents, self._views_refused_for)
        if self._deletes_rows:
            self._require_no_pending_mutation(client, name)

    def require_no_pending_mutation(self, table: str) -> None:
        """``SettledCountingSink``: before counts an operator's decision rests on (``--adopt-target``)."""
        name = self._name(table)
        with self._failures("look for mutations pending on the target table", name, step="count"):
            pending = pending_mutations(self._client(), name)
        if pending:
            raise DponeError(
                ErrorCode.ROUTE_BUSY,
                f"target table {name} has {pending} mutation(s) pending: its row counts are not final (rows a "
                "mutation is still deleting or changing would be counted), so nothing was recorded",
                details={"table": str(name), "mutations_pending": pending},
                hint_lines=(*_pending_mutation_hints(name), "runbook:  dpone runbook guard"),
            )

    def _require_no_pending_mutation(self, client: Client, name: TableName) -> None:
        """Before arming, for a route that deletes: mutations run in order, so a pending one (a slow or a
        failing ``ALTER ... DELETE/UPDATE`` someone sent) holds the run's delete behind it. Seen: a
        failing mutation left on the table; the armed run's delete waited its 600 s (18.16) or failed at
        once (chDB), with its partitions' rows deleted and not loaded again, and the route blocked."""
        pending = pending_mutations(client, name)
        if pending == 0:
            return
        raise DponeError(
            ErrorCode.ROUTE_BUSY,
            f"target table {name} has {pending} mutation(s) pending: this route's delete would wait behind "
            "them, so nothing was written",
            details={"table": str(name), "mutations_pending": pending},
            hint_lines=_pending_mutation_hints(name),
        )

    def _refusals_before_statements(
        self, table: str, schema: TableSchema, order_by: tuple[str, ...]
    ) -> TableName:
        name = self._name(table)
        for column in order_by:
            require_column(schema, "sink.order_by", column)
        # before the first statement, so a refused name leaves no table, checkpoint or armed guard
        _refuse_driver_misquoted(schema)
        return name

    # -- direct load -------------------------------------------------------------------------------

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        """Strategy scope, then every chunk, column-oriented; the table proven unchanged (``target_pin``).
        Returns rows inserted."""
        permit.require_open(table)
        name = self._name(table)
        self._tag = target_tag(name)
        try:
            return self._load(name, schema, self._scope(permit), chunks, permit)
        finally:
            self._tag = None

    def _load(
        self,
        name: TableName,
        schema: TableSchema,
        scope: _Scope,
        chunks: Iterable[ColumnChunk],
        permit: TargetPermit,
    ) -> int:
        stream = iter(chunks)
        load = LoadScope(permit.route.describe(), permit.checkpoint_batch_id, len(permit.partitions))
        # Right after arming, before the source's first read: the table's columns, identity, mutations and
        # counts, what the load proves unchanged after its last insert (a table replaced, truncated or
        # updated meanwhile).
        with self._failures("read the target table's columns", name, step="describe", code=_LOAD):
            client = self._client()
            target = self._describe(client, name)
            types = self._require_compatible(name, schema, target)
            counted = self._counted_scope(scope, permit, target)
            before = self._pin(client, name, counted)
            if before.identity is None:  # just described: a listing cut to nothing, not a table gone
                raise OperationalError("system.tables does not list a table just described")
        # The first chunk is pulled before the target is written: a source or artifact that fails at once
        # (unreachable, digest mismatch) then fails the call before any truncate or delete.
        first = next(stream, None)
        self._apply_scope(client, name, scope, target)
        own = self._own_mutations(client, name, scope, before)
        head: list[ColumnChunk] = [first] if first is not None else []

        def before_insert(rows_before: int) -> None:
            self._require_types_unchanged(client, name, load, types, rows_before)

        # a server that reads a declared type's bytes as the column's (18.16) is asked before each insert
        check = None if self._endpoint.interface is ClickHouseInterface.CHDB else before_insert
        rows = self._insert_all(client, name, schema, types, itertools.chain(head, stream), check)
        with self._failures("read the target table after the load", name, step="verify", code=_LOAD):
            after = self._pin(client, name, counted)
            found = self._describe(client, name) if after.identity is not None else None
        changed = changed_columns(types, found) if found is not None else []
        if changed:
            raise types_changed_error(name, load, changed, inserted=rows, before_insert=False)
        keeps_rows = not scope.truncate and not scope.bounds
        whole = counted is None
        problem = what_changed(
            before, after, inserted=rows, keeps_rows=keeps_rows, own=own, whole_table=whole
        )
        if problem is not None:
            raise table_changed_error(
                name,
                load,
                problem,
                before,
                after,
                inserted=rows,
                keeps_rows=keeps_rows,
                own=own,
                whole_table=whole,
            )
        log.info("loaded %d rows into %s", rows, name)
        return rows

    def _counted_scope(
        self, scope: _Scope, permit: TargetPermit, target: Mapping[str, TargetColumn]
    ) -> list[str] | None:
        """The conditions of the rows a load's counts cover (``None``: the whole table): what the strategy
        replaces, or the armed partitions an append adds to (the whole table for a permit without any)."""
        if scope.truncate or not permit.bounds:
            return None
        return delete_conditions(scope.bounds or permit.bounds, _types_of(target))

    def _pin(self, client: Client, name: TableName, counted: list[str] | None) -> TablePin:
        if self._table_uuids is None:
            self._table_uuids = has_table_uuids(client)
        return read_pin(client, name, counted, uuids=self._table_uuids)

    def _own_mutations(
        self, client: Client, name: TableName, scope: _Scope, before: TablePin
    ) -> frozenset[str]:
        """Right after the strategy's delete (``replace_partition``), its mutations: those carrying dpone's
        tag of the table (``delete_marker``) that were not there at the pin. Any other mutation the load
        finds after its last insert stops it (``target_pin``); one begun during the delete without the tag
        is not taken for its own."""
        if not scope.bounds or self._tag is None:
            return frozenset()  # an append writes no mutation; a truncate is none
        with self._failures("read the target table's mutations", name, step="delete", code=_LOAD):
            return own_mutations(client, name, self._tag) - before.mutations

    def _require_types_unchanged(
        self, client: Client, name: TableName, load: LoadScope, types: Mapping[str, str], rows: int
    ) -> None:
        """Before an insert: the written columns still have the types it declares (``target_pin``). A
        failure to read them is the insert's own (``_insert_block``)."""
        changed = changed_columns(types, self._describe(client, name))
        if changed:
            raise types_changed_error(name, load, changed, inserted=rows, before_insert=True)

    # -- staged load -------------------------------------------------------------------------------

    def begin_staging(
        self, table: str, schema: TableSchema, operation_id: str, order_by: tuple[str, ...] = ()
    ) -> str:
        """A fresh staging table for one attempt of an operation (the operation's leftovers are dropped
        first), defined as :meth:`prepare_target` defines the target, so its parts can be attached to it."""
        name = self._refusals_before_statements(table, schema, order_by)
        staging = _staging_of(name, operation_id, attempt=secrets.token_hex(6))
        with self._failures("create the staging table", staging, step="begin_staging"):
            client = self._client()
            require_plain_inserts(client, self._endpoint, str(name))
            client.command(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(name.database)}")
            for leftover in self._stagings_of(client, name, (operation_id,)):
                client.command(f"DROP TABLE IF EXISTS {leftover.sql()}")
            client.command(
                create_staging_sql(
                    staging,
                    schema,
                    order_by,
                    nullable_key_setting=self._nullable_key(client, schema, order_by),
                )
            )
        return str(staging)

    def stage(self, staging_table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]) -> int:
        """Insert into the staging table (not a target mutation: no permit). Returns rows staged, once the
        staging table is seen to hold exactly that many more rows: an insert applied twice (a request sent
        again after its answer was lost, ADR 0094) or in part stops here, before arming, with nothing
        published and no partition blocked, instead of attaching every row twice."""
        staging = self._staging_name(staging_table)
        types = {c.name: c.full_type() for c in schema.columns}
        count = f"SELECT count() FROM {staging.sql()}"
        with self._failures("open the staging table", staging, step="stage"):
            client = self._client()
            before = int(client.query(count).result_rows[0][0])
        sent = self._insert_all(client, staging, schema, types, chunks)
        with self._failures("count the staging table", staging, step="stage"):
            held = int(client.query(count).result_rows[0][0]) - before
        if held != sent:
            raise DponeError(
                ErrorCode.TARGET_LOAD_FAILED,
                f"staging table {staging} gained {held} row(s) for the {sent} staged; nothing was published",
                details={"staging_table": str(staging), "rows_staged": sent, "rows_held": held},
                hint_lines=(
                    "nothing reached the target and no partition is blocked: run again (the next run drops "
                    "this staging table and stages afresh)",
                ),
            )
        return sent

    def finalize_staged_load(self, permit: TargetPermit, staging_table: str, table: str) -> int:
        """Strategy scope, then the staging table's parts attached to the target where both are defined
        alike (``staged_publish``), else ``INSERT INTO target SELECT ... FROM staging``; drop staging.
        Returns rows published."""
        permit.require_open(table)
        name = self._name(table)
        self._tag = target_tag(name)
        try:
            return self._publish(name, self._staging_name(staging_table), self._scope(permit))
        finally:
            self._tag = None

    def _publish(self, name: TableName, staging: TableName, scope: _Scope) -> int:
        if staging.database != name.database:
            raise DponeError(
                ErrorCode.TARGET_LOAD_FAILED,
                f"staging table {staging} does not belong to target table {name}",
                details={"table": str(name), "staging_table": str(staging)},
            )
        with self._failures("read the staging and target tables", name, step="describe", code=_LOAD):
            client = self._client()
            if not self._exists(client, staging):
                raise DponeError(
                    ErrorCode.TARGET_LOAD_FAILED,
                    f"staging table {staging} does not exist; nothing was published",
                    details={"table": str(name), "staging_table": str(staging)},
                )
            staged = self._describe(client, staging)
            target = self._describe(client, name)
            rows = int(client.query(f"SELECT count() FROM {staging.sql()}").result_rows[0][0])
            partitions = attachable_partitions(client, staging, name, rows=rows)
        self._require_staging_fits(name, staged, target)
        self._apply_scope(client, name, scope, target)
        columns = column_list(list(staged))
        with self._failures("publish the staging table into the target", name, step="publish", code=_LOAD):
            if partitions is None:
                client.command(
                    f"INSERT INTO {name.sql()} ({columns}) SELECT {columns} FROM {staging.sql()}",
                    settings=tagged(plain_insert_settings(client), self._tag),
                )
            else:
                for partition_id in partitions:
                    client.command(
                        attach_statement(name, partition_id, staging), settings=tagged(None, self._tag)
                    )
        how = "rows copied" if partitions is None else "parts attached"
        log.info("published %d staged rows into %s (%s)", rows, name, how)
        self._drop_staging(staging)
        return rows

    def drop_leftover_staging(self, table: str, *operation_ids: str) -> None:
        """Drop the staging tables :meth:`begin_staging` made for these operations, if attempts that were
        killed left them (one listing for all); never raises (a run with nothing to move calls it, and its
        outcome stands)."""
        name = self._name(table)
        try:
            leftovers = self._stagings_of(self._client(), name, operation_ids)
        except Exception:
            log.warning("could not list the staging tables of %s; the next attempt drops them", name)
            return
        for leftover in leftovers:
            self._drop_staging(leftover)

    @staticmethod
    def _stagings_of(client: Client, target: TableName, operation_ids: Sequence[str]) -> list[TableName]:
        """Every staging table of ``operation_ids`` on ``target``: each attempt's (the route's lease is held,
        so none of them is a live run's own) and the one an older release named without an attempt."""
        stems = [_staging_of(target, operation_id).table for operation_id in operation_ids]
        if not stems:
            return []
        matches = " OR ".join(
            f"name = {quote_string(stem)} OR substring(name, 1, {len(stem) + 1}) = {quote_string(stem + '_')}"
            for stem in stems
        )
        found = client.query(
            f"SELECT name FROM system.tables WHERE database = {quote_string(target.database)} AND ({matches})"
        ).result_rows
        return [TableName(target.database, str(row[0])) for row in found]

    def abort_staged_load(self, staging_table: str) -> None:
        """Drop the staging table; idempotent and never raises (it runs in ``finally`` blocks)."""
        try:
            staging = self._staging_name(staging_table)
        except DponeError:
            log.warning("refusing to drop %r: not a dpone staging table", staging_table)
            return
        self._drop_staging(staging)

    # -- internals ---------------------------------------------------------------------------------

    def _name(self, table: str) -> TableName:
        try:
            return TableName.parse(table, self._endpoint.database)
        except ValueError:
            raise DponeError(
                ErrorCode.USAGE,
                "target table names are 'database.table'",
                details={"connection": self._endpoint.name},
            ) from None

    def _staging_name(self, staging_table: str) -> TableName:
        name = self._name(staging_table)
        if not name.table.startswith(STAGING_PREFIX):
            raise DponeError(
                ErrorCode.USAGE,
                "not a dpone staging table (names start with _dpone_stage_)",
                details={"staging_table": staging_table},
            )
        return name

    def _where(self, bounds: PartitionBounds | None, column_types: Mapping[str, str] | None = None) -> str:
        try:
            return where_clause(bounds, column_types)
        except BoundsError as exc:
            raise _bounds_error(exc, bounds) from None

    def _scope(self, permit: TargetPermit) -> _Scope:
        """The strategy's scope, fully built (bounds validated) before any statement is sent."""
        strategy = permit.route.strategy
        if strategy is Strategy.FULL_REFRESH:
            return _Scope(truncate=True)
        if strategy is Strategy.REPLACE_PARTITION:
            if not permit.bounds:
                return _Scope()
            try:
                condition = any_of(permit.bounds)
            except BoundsError as exc:
                raise _bounds_error(exc, None) from None
            return _Scope(truncate=True) if condition is None else _Scope(bounds=tuple(permit.bounds))
        return _Scope()

    def _apply_scope(
        self, client: Client, name: TableName, scope: _Scope, target: Mapping[str, TargetColumn]
    ) -> None:
        if scope.truncate:
            with self._failures("truncate the target table", name, step="truncate", code=_LOAD):
                client.command(f"TRUNCATE TABLE {name.sql()}", settings=tagged(None, self._tag))
        elif scope.bounds:
            conditions = delete_conditions(scope.bounds, _types_of(target))  # validated by _scope already
            if conditions is None:
                raise DponeError(ErrorCode.TARGET_LOAD_FAILED, "a partition scope lost its bounds")
            with self._failures("delete the armed partitions' rows", name, step="delete", code=_LOAD):
                for condition in conditions:  # one statement per few hundred ranges (max_query_size)
                    delete_where(
                        client,
                        name,
                        condition,
                        self._mutation_timeout_s,
                        tagged(None, self._tag),
                        delete_marker(self._tag),
                    )

    def _insert_all(
        self,
        client: Client,
        name: TableName,
        schema: TableSchema,
        types: Mapping[str, str],
        chunks: Iterable[ColumnChunk],
        before_insert: Callable[[int], None] | None = None,
    ) -> int:
        """Insert every chunk, merging small ones into blocks (see ``INSERT_BLOCK_ROWS``). Returns rows.
        ``before_insert`` is called with the rows inserted so far before each insert (it may raise)."""
        encoders: dict[tuple[str, ...], InsertContext] = {}
        pending: list[tuple[int, ColumnChunk]] = []
        pending_rows = 0
        rows = 0
        inserted = False
        for index, chunk in enumerate(chunks):
            self._check_columns(name, schema, chunk, index)
            if chunk.row_count == 0:
                continue
            if pending and (
                pending[0][1].names != chunk.names
                or pending_rows + chunk.row_count > INSERT_BLOCK_MAX_ROWS
                or (pending_rows + chunk.row_count) * len(chunk.names) > INSERT_BLOCK_CELLS
            ):
                rows += self._insert_block(client, name, types, encoders, pending, rows, before_insert)
                pending, pending_rows = [], 0
            pending.append((index, chunk))
            pending_rows += chunk.row_count
            if not inserted or pending_rows >= INSERT_BLOCK_ROWS or len(pending) >= INSERT_BLOCK_MAX_CHUNKS:
                rows += self._insert_block(client, name, types, encoders, pending, rows, before_insert)
                pending, pending_rows, inserted = [], 0, True
        if pending:
            rows += self._insert_block(client, name, types, encoders, pending, rows, before_insert)
        return rows

    @staticmethod
    def _check_columns(name: TableName, schema: TableSchema, chunk: ColumnChunk, index: int) -> None:
        if set(chunk.names) != set(schema.names) or len(chunk.names) != len(schema.names):
            raise DponeError(
                ErrorCode.TARGET_LOAD_FAILED,
                f"a chunk's columns do not match the table schema of {name}",
                details={"table": str(name), "partition_id": chunk.partition_id, "chunk_index": index},
            )

    def _insert_block(
        self,
        client: Client,
        name: TableName,
        types: Mapping[str, str],
        encoders: dict[tuple[str, ...], InsertContext],
        block: Sequence[tuple[int, ColumnChunk]],
        rows_before: int,
        before_insert: Callable[[int], None] | None = None,
    ) -> int:
        """One insert of one or more chunks with the same column order (columns concatenated): as Arrow
        into chDB when every column has an exact Arrow form (``arrow_insert``); to a server, Native built
        from that Arrow form where ``native_body`` writes every column, else by clickhouse-connect."""
        first_index, first = block[0]
        names = first.names
        data = _block_columns(block, len(names))
        row_count = sum(chunk.row_count for _, chunk in block)
        self._require_within_limits(name, names, [types[n] for n in names], data)
        try:
            if before_insert is not None:  # a server gone meanwhile fails here, as its insert would
                before_insert(rows_before)
            type_names = [types[n] for n in names]
            # this request's own token (insert_settings.py) and, under a permit, query_id (statements_in_flight)
            settings = tagged(plain_insert_settings(client), self._tag)
            table = arrow_table(names, type_names, data)
            if table is not None and self._arrow_inserts():
                client.insert_arrow(name.sql(), table, settings=settings)
                return row_count
            if names not in encoders:  # one context per column order and load (see insert_context.py)
                encoders[names] = insert_context(client, name.sql(), names, column_types(type_names))
            context = encoders[names]
            context.settings = settings  # a reused context: every insert a token of its own
            wire_names = [column_type.insert_name for column_type in context.column_types]
            body = None if table is None else native_body(table, type_names, wire_names)
            if body is not None:  # the same bytes clickhouse-connect's encoder writes (native_body.py)
                client.raw_insert(
                    name.sql(),
                    column_names=list(names),
                    insert_block=body,
                    fmt="Native",
                    settings=settings,
                )
                return row_count
            try:
                client.insert(data=insert_columns(type_names, data, context.column_types), context=context)
            finally:
                release_block(context)
        except DponeError:
            raise
        except Exception as exc:
            details = failure_details(self._endpoint, exc)
            partitions = list(dict.fromkeys(chunk.partition_id for _, chunk in block))
            details.update(
                table=str(name),
                step="insert",
                partition_id=first.partition_id,
                chunk_index=first_index,
                rows_inserted_before=rows_before,
            )
            if len(block) > 1:
                details.update(chunks_in_block=len(block), partition_ids=partitions)
            raise DponeError(
                ErrorCode.TARGET_LOAD_FAILED,
                f"inserting into {name} failed after {rows_before} rows",
                details=details,
            ) from exc
        return row_count

    def _arrow_inserts(self) -> bool:
        """chDB reads Arrow bodies; ClickHouse 18.16 servers have no Arrow input format (Native only)."""
        return self._endpoint.interface is ClickHouseInterface.CHDB

    def _drop_staging(self, staging: TableName) -> None:
        try:
            self._client().command(f"DROP TABLE IF EXISTS {staging.sql()}")
        except Exception:
            log.warning("could not drop staging table %s; it is dropped by the next attempt", staging)

    @staticmethod
    def _exists(client: Client, name: TableName) -> bool:
        return bool(int(client.query(f"EXISTS TABLE {name.sql()}").result_rows[0][0]))

    @staticmethod
    def _describe(client: Client, name: TableName) -> dict[str, TargetColumn]:
        described = client.query(f"DESCRIBE TABLE {name.sql()}")
        if not described.result_rows:  # a table has a column: an answer cut to nothing (ADR 0094, addendum)
            raise OperationalError("DESCRIBE TABLE answered no column")
        # ttl_expression: modern servers and chDB; 18.16 (before TTLs) has no such column
        ttl = (
            described.column_names.index("ttl_expression")
            if "ttl_expression" in described.column_names
            else None
        )
        return {
            str(r[0]): TargetColumn(
                str(r[0]), str(r[1]), str(r[2] or ""), str(r[ttl] or "") if ttl is not None else ""
            )
            for r in described.result_rows
        }

    def _nullable_key(self, client: Client, schema: TableSchema, order_by: tuple[str, ...]) -> bool:
        """Whether a table of ``schema`` keyed by ``order_by`` is created with ``allow_nullable_key``."""
        return any(schema.column(c).nullable for c in order_by) and self._has_nullable_key_setting(client)

    @staticmethod
    def _has_nullable_key_setting(client: Client) -> bool:
        query = "SELECT count() FROM system.merge_tree_settings WHERE name = " + quote_string(
            "allow_nullable_key"
        )
        return bool(int(client.query(query).result_rows[0][0]))

    def _require_compatible(
        self, name: TableName, schema: TableSchema, target: Mapping[str, TargetColumn]
    ) -> dict[str, str]:
        """Refuse before any write; return the target's own type of each source column for inserts."""
        problems = compatibility_problems(schema, target, allow_ttl=self._allow_ttl)
        if problems:
            first = problems[0]
            raise DponeError(
                ErrorCode.TARGET_INCOMPATIBLE,
                f"target table {name} is incompatible: column {first.column!r} is {first.reason}"
                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
                + "; nothing was written",
                details={
                    "table": str(name),
                    "column": first.column,
                    "problems": [
                        {
                            "column": p.column,
                            "reason": p.reason,
                            "expected_type": p.expected_type,
                            "found_type": p.found_type,
                        }
                        for p in problems
                    ],
                },
                hint_lines=(
                    *(
                        f"column {p.column} is {p.reason} (expected {p.expected_type}, found {p.found_type or 'none'})"
                        for p in problems
                    ),
                    *(
                        (
                            "a column the route does not write: add it to source.columns, or declare how new rows "
                            "fill it (ALTER TABLE ... MODIFY COLUMN <column> <type> DEFAULT <expression>, or a "
                            "Nullable type), or drop it from the target",
                        )
                        if any(p.column not in schema.names for p in problems)
                        else ()
                    ),
                    *(MISSING_COLUMN_HINT if any(p.reason == MISSING_FROM_TARGET for p in problems) else ()),
                    *(TTL_ALREADY_EXPIRED if any(p.reason.startswith(COLUMN_TTL) for p in problems) else ()),
                ),
            )
        return {c.name: target[c.name].type_name for c in schema.columns}

    def _require_staging_fits(
        self, name: TableName, staged: Mapping[str, TargetColumn], target: Mapping[str, TargetColumn]
    ) -> None:
        for column in staged.values():
            found = target.get(column.name)
            if (
                found is None
                or not found.insertable
                or not types_compatible(column.type_name, found.type_name)
            ):
                raise DponeError(
                    ErrorCode.TARGET_INCOMPATIBLE,
                    f"target table {name} is incompatible with the staged column {column.name!r}; "
                    "nothing was written",
                    details={
                        "table": str(name),
                        "column": column.name,
                        "expected_type": column.type_name,
                        "found_type": found.type_name if found else None,
                    },
                )

    @contextmanager
    def _failures(
        self, action: str, name: TableName, *, step: str, code: ErrorCode | None = None
    ) -> Iterator[None]:
        """Map driver failures to safe errors. ``code`` fixes the code (mutating steps); otherwise a
        transport failure is ``target_unreachable`` and a server refusal ``target_load_failed``."""
        try:
            yield
        except DponeError:
            raise
        except Exception as exc:
            chosen = code or (
                ErrorCode.TARGET_UNREACHABLE
                if isinstance(exc, OperationalError)
                else ErrorCode.TARGET_LOAD_FAILED
            )
            details = failure_details(self._endpoint, exc)
            details.update(table=str(name), step=step)
            if isinstance(exc, MutationTimeout):
                message = (
                    f"could not {action} {name}: the delete did not finish in {self._mutation_timeout_s:g} s"
                )
            else:
                message = f"could not {action} {name} ({self._endpoint.describe()})"
            raise DponeError(chosen, message, details=details) from exc


_LOAD = ErrorCode.TARGET_LOAD_FAILED


def _staging_of(target: TableName, operation_id: str, *, attempt: str | None = None) -> TableName:
    """The staging table of one operation on ``target``: beside it, named by a digest of both, and by the
    attempt that creates it. An attempt's own name keeps a run whose lease ended under it (its database
    session closed) from inserting into the table of the run that took the lease over, which that run
    would then publish (seen: every row twice, exit 0); without ``attempt``, the stem all of them share."""
    digest = hashlib.sha256(f"{target}|{operation_id}".encode()).hexdigest()[:16]
    return TableName(target.database, STAGING_PREFIX + digest + (f"_{attempt}" if attempt else ""))


def _pending_mutation_hints(name: TableName) -> tuple[str, ...]:
    """How on-call sees the mutations pending on ``name`` and gets past a failing one."""
    return (
        "see them: SELECT mutation_id, command, create_time, parts_to_do FROM system.mutations "
        f"WHERE database = '{name.database}' AND table = '{name.table}' AND is_done = 0 (newer "
        "servers also have latest_fail_reason: why one fails)",
        "wait for them to finish and run again (an Airflow retry does); a failing one, once you know "
        "whose it is: KILL MUTATION WHERE mutation_id = '<id>' (servers without KILL MUTATION, such "
        "as 18.x, need their administrator to remove it)",
    )


def _refuse_driver_misquoted(schema: TableSchema) -> None:
    """Refuse a column the insert would address as another column (see ``quoting.driver_misquotes``)."""
    for column in schema.columns:
        if driver_misquotes(column.name):
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                f"source column {column.name!r} cannot be inserted into ClickHouse: a name that starts and "
                "ends with a backtick or a double quote is taken for a quoted name by the client; alias it "
                "in source.query or leave it out of source.columns",
                details={"column": column.name, "field": "source.columns"},
            )


def _block_columns(block: Sequence[tuple[int, ColumnChunk]], width: int) -> Sequence[Sequence[object]]:
    """The block's columns: one chunk's as they are; several chunks' concatenated, Arrow columns of one
    type as Arrow (no Python values built), any other column as a list of the chunks' values."""
    if len(block) == 1:
        return block[0][1].columns
    return [join_columns([chunk.columns[i] for _, chunk in block]) for i in range(width)]


def _types_of(target: Mapping[str, TargetColumn]) -> dict[str, str]:
    return {column: spec.type_name for column, spec in target.items()}


def _bounds_error(exc: BoundsError, bounds: PartitionBounds | None) -> DponeError:
    label = bounds.label if bounds is not None else "armed partitions"
    return DponeError(
        ErrorCode.TARGET_LOAD_FAILED,
        f"bounds of {label} cannot be expressed as a ClickHouse predicate: {exc}; nothing was written",
        details={"partition": label},
    )


def _without_low_cardinality(type_name: str) -> str:
    """``LowCardinality(T)`` as ``T``, spelled as the server prints it (a source's mapping spells it so)."""
    match = re.match(r"^LowCardinality\((.*)\)$", type_name.strip())
    return match.group(1) if match else type_name
