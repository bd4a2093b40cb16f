"""SQL Server source over pymssql (TDS): describe, plan partitions, stream rows in bounded chunks.

Metadata, planning and counts share one connection; every ``read()`` opens its own, because a pymssql
connection holds one pending result set and silently drops it when another statement runs (measured on the
TDS emulator), so an interleaved count or a second partition stream would truncate a read without error.
Rows come from ``fetchmany(chunk_rows)``: FreeTDS streams them off the socket, so memory stays bounded.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from typing import Any

import pymssql

from airflow_provider_dpone.adapters.sources import (
    definition_compare,
    list_spelling,
    mssql_connect,
    mssql_types,
    profiling,
    value_audit,
)
from airflow_provider_dpone.adapters.sources import key_fingerprints as fingerprints
from airflow_provider_dpone.adapters.sources import mssql_sql as tsql
from airflow_provider_dpone.adapters.sources import partition_counts as grouped
from airflow_provider_dpone.adapters.sources import partition_planning as planning
from airflow_provider_dpone.adapters.sources.chunking import ChunkBuilder, stream_chunks
from airflow_provider_dpone.adapters.sources.read_shape import (
    DescribedColumns,
    checked_schema,
    order_columns,
    read_schema,
    unnamed_column,
)
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.key_fingerprint import (
    KeyFingerprint,
)
from airflow_provider_dpone.contracts.manifest import PartitionKind, SourceSpec
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.read_definition import LeftOutCounts, NotCompared, ReadDefinition
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.ports.source import ColumnProfile, DefinitionsNotComparable, ValueLimits

log = logging.getLogger(__name__)

INVALID_OBJECT_NAME = 208
#: rows per fetch of the list-spelling read (one text column)
_SPELLING_BATCH = 10_000


def error_number(exc: BaseException) -> int | None:
    """SQL Server's message number from a pymssql exception: ``args`` is ``(number, message)``, or one
    tuple of both (older releases)."""
    number = getattr(exc, "number", None)
    if isinstance(number, int):
        return number
    first = exc.args[0] if exc.args else None
    if isinstance(first, tuple) and first:
        first = first[0]
    return first if isinstance(first, int) and not isinstance(first, bool) else None


#: FreeTDS's message when text cannot be converted to the client's UTF-8 (a byte the varchar column's code
#: page leaves undefined, an unpaired surrogate in an nvarchar): it would have arrived as ``?``
#: (``mssql_connect.CONVERSION_SEVERITY``).
TEXT_NOT_CONVERTIBLE = 2403
_UNCONVERTIBLE_HINTS = (
    "a varchar value holds a byte its column's code page leaves undefined, or an nvarchar value an unpaired "
    "surrogate: it cannot arrive as the same text, and would have arrived with '?' in its place",
    "select the column as bytes (source.query with CAST(col AS varbinary(max))), or repair the value at the "
    "source; on lazy_plan + direct the read failed inside the target call: see `dpone runbook guard`",
)


class MssqlSource:
    """The ``Source`` port over a SQL Server table (or a query over it)."""

    def __init__(
        self, endpoint: EndpointDescriptor, spec: SourceSpec, *, login_timeout: int | None = None
    ) -> None:
        if endpoint.kind is not EndpointKind.MSSQL or not endpoint.host:
            raise DponeError(
                ErrorCode.CONNECTION_INVALID,
                f"{endpoint.describe()} is not a SQL Server connection with a host",
                details={"connection": endpoint.name},
            )
        try:
            self._table = tsql.TableRef.parse(spec.table)
        except tsql.SqlBuildError:
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                "source.table is not a SQL Server table name ([catalog.][schema.]table)",
                details={"table": spec.table},
            ) from None
        self._endpoint = endpoint
        self._host: str = endpoint.host
        self._spec = spec
        self._login_timeout = login_timeout
        self._source_sql = tsql.source_sql(self._table, spec.query)
        self._meta: Any = None
        self._readers: set[Any] = set()
        self._full: TableSchema | None = None
        #: described columns whose type has no mapping (``DescribedColumns``)
        self._unsupported: dict[str, DponeError] = {}
        self._schema: TableSchema | None = None
        self._keys: list[str] | None = None
        self._coarse = False

    # -- connections -----------------------------------------------------------------------------------

    def _details(self, **extra: object) -> dict[str, object]:
        return {"connection": self._endpoint.name, "table": self._spec.table, **extra}

    def _connect(self) -> Any:
        endpoint = self._endpoint
        try:
            # the one connect path (the hook's too); a reader must not hold an open transaction
            return mssql_connect.connect(endpoint, autocommit=True, login_timeout=self._login_timeout)
        except (pymssql.Error, OSError) as exc:
            raise DponeError(
                ErrorCode.SOURCE_UNREACHABLE,
                f"cannot connect to {endpoint.describe()}",
                details=self._details(),
            ) from exc

    def _meta_connection(self) -> Any:
        if self._meta is None:
            self._meta = self._connect()
        return self._meta

    def _fetch_all(self, statement: tsql.Statement, *, what: str) -> list[tuple[Any, ...]]:
        cursor = self._meta_connection().cursor()
        try:
            cursor.execute(statement.render())
            return list(cursor.fetchall())
        except pymssql.Error as exc:
            raise self._classified(exc, what) from exc
        finally:
            cursor.close()

    def _classified(self, exc: BaseException, what: str) -> DponeError:
        if error_number(exc) == INVALID_OBJECT_NAME:
            return DponeError(
                ErrorCode.SOURCE_TABLE_MISSING,
                f"source table {self._spec.table} does not exist (or is not visible to this login)",
                details=self._details(),
            )
        return DponeError(
            ErrorCode.SOURCE_READ_FAILED,
            f"reading {what} from source table {self._spec.table} failed",
            details=self._details(sql_error_number=error_number(exc)),
        )

    # -- describe --------------------------------------------------------------------------------------

    def _describe_full(self) -> TableSchema:
        if self._full is None:
            self._full = self._describe_query() if self._spec.query else self._describe_table()
        return self._full

    def _describe_table(self) -> TableSchema:
        rows = self._fetch_all(tsql.describe_table(self._table), what="the column list")
        if not rows:
            raise DponeError(
                ErrorCode.SOURCE_TABLE_MISSING,
                f"source table {self._spec.table} does not exist (or is not visible to this login)",
                details=self._details(),
            )
        described = DescribedColumns()
        for name, data_type, is_nullable, precision, scale in rows:
            described.add(
                str(name),
                functools.partial(
                    mssql_types.column_spec,
                    str(name),
                    str(data_type),
                    str(is_nullable).upper() == "YES",
                    precision,
                    scale,
                ),
            )
        self._unsupported = described.unsupported
        return described.schema()

    def _describe_query(self) -> TableSchema:
        assert self._spec.query is not None
        try:
            rows = self._fetch_all(tsql.describe_query(self._spec.query), what="the query description")
        except DponeError as exc:
            if exc.code is ErrorCode.SOURCE_UNREACHABLE:
                raise
            # Servers without the DMV (the TDS emulator, pre-2012) -> coarse wire types from TOP 0.
            log.warning("the server cannot describe the source query exactly; using coarse wire types")
            self._coarse = True
            return self._describe_top0()
        if any(row[5] is not None for row in rows):
            number = next(row[5] for row in rows if row[5] is not None)
            if number == INVALID_OBJECT_NAME:
                raise DponeError(
                    ErrorCode.SOURCE_TABLE_MISSING,
                    f"the source query reads a table that does not exist (route {self._spec.table})",
                    details=self._details(),
                )
            raise DponeError(
                ErrorCode.SOURCE_READ_FAILED,
                "the source query cannot be described by the server",
                details=self._details(sql_error_number=number),
            )
        described = DescribedColumns()
        for position, (name, type_name, nullable, precision, scale, _) in enumerate(rows, start=1):
            if not name:
                raise unnamed_column(position)
            described.add(
                str(name),
                functools.partial(
                    mssql_types.column_spec,
                    str(name),
                    str(type_name),
                    nullable is None or bool(nullable),
                    precision,
                    scale,
                ),
            )
        self._unsupported = described.unsupported
        return described.schema()

    def _describe_top0(self) -> TableSchema:
        cursor = self._meta_connection().cursor()
        try:
            cursor.execute(tsql.first_zero_rows(self._source_sql).render())
            description = cursor.description or ()
            cursor.fetchall()
        except pymssql.Error as exc:
            raise self._classified(exc, "the query description") from exc
        finally:
            cursor.close()
        columns = []
        for position, entry in enumerate(description, start=1):
            if not entry[0]:
                raise unnamed_column(position)
            columns.append(mssql_types.coarse_column_spec(str(entry[0]), int(entry[1])))
        return checked_schema(columns)

    def describe(self) -> TableSchema:
        if self._schema is None:
            # every manifest field naming a source column is checked here, before planning
            self._schema = read_schema(self._describe_full(), self._spec, self._unsupported)
        return self._schema

    def query_hash(self) -> str:
        return planning.read_definition_hash(self._spec)

    def read_definition(self) -> ReadDefinition:
        return planning.read_definition(self._spec)

    def rows_left_out(
        self, earlier: ReadDefinition, regions: Sequence[Sequence[PartitionBounds]]
    ) -> LeftOutCounts:
        """``DefinitionComparingSource``: one multiset count per batch of regions (``definition_compare``),
        on the earlier definition's query (or the table) beside this one's. A column of a type ``GROUP BY``
        refuses is found from this read's description first: text, ntext and xml are compared as
        ``(n)varchar(max)``, an image column is left out (``definition_compare.tsql_comparable``)."""
        current = self.read_definition()
        if (earlier.source_type, earlier.table) != (current.source_type, current.table):
            raise DefinitionsNotComparable(NotCompared.OTHER_SOURCE)
        if not regions:
            return LeftOutCounts(total=0, regions=())
        schema = self.describe()
        earlier_sql = tsql.source_sql(self._table, earlier.query)
        names = [str(column[0]) for column in self._compared(tsql.first_zero_rows(earlier_sql), rows=False)]
        shared = definition_compare.shared_columns(schema.names, names, earlier.columns)
        columns, casts = definition_compare.tsql_comparable(shared, schema, self._spec.partitioning.column)

        def count(batch: Sequence[Sequence[PartitionBounds]]) -> int:
            statement = self._statement(
                functools.partial(tsql.rows_left_out, earlier_sql, self._source_sql, columns, batch, casts),
                batch[0][0],
            )
            return int(self._compared(statement, rows=True)[0][0])

        return definition_compare.counts_per_region(regions, count)

    def _compared(self, statement: tsql.Statement, *, rows: bool) -> list[Any]:
        """``statement`` of a definitions' comparison: its rows, or (``rows=False``) its cursor's column
        description. An error naming what the database no longer holds, or a column ``GROUP BY`` cannot
        compare, means the comparison cannot be made (``DefinitionsNotComparable``); any other fails the
        read."""
        cursor = self._meta_connection().cursor()
        try:
            cursor.execute(statement.render())
            fetched = list(cursor.fetchall())
            return fetched if rows else list(cursor.description or ())
        except pymssql.Error as exc:
            reason = definition_compare.mssql_reason(error_number(exc))
            if reason is not None:
                raise DefinitionsNotComparable(reason) from exc
            raise self._classified(exc, "the comparison of two read definitions") from exc
        finally:
            cursor.close()

    # -- planning --------------------------------------------------------------------------------------

    def plan_partitions(self) -> list[PartitionBounds]:
        self.describe()
        return planning.plan(self._spec.partitioning, self._describe_full(), self)

    def column_stats(self, column: ColumnSpec, kind: PartitionKind) -> planning.ColumnStats:
        text_calendar = (
            kind in (PartitionKind.DAY, PartitionKind.MONTH) and column.clickhouse_type == "String"
        )
        statement = tsql.column_stats(self._source_sql, column, text_calendar=text_calendar)
        rows = self._fetch_all(statement, what="partition statistics")
        total, unplaceable, lowest, highest = rows[0]
        return planning.ColumnStats(
            rows=int(total), unplaceable=int(unplaceable or 0), lower=lowest, upper=highest
        )

    def distinct_days(self, column: ColumnSpec) -> list[date]:
        rows = self._fetch_all(tsql.distinct_days(self._source_sql, column), what="partition days")
        return [_as_date(row[0]) for row in rows]

    def distinct_months(self, column: ColumnSpec) -> list[tuple[int, int]]:
        rows = self._fetch_all(tsql.distinct_months(self._source_sql, column), what="partition months")
        return [(int(year), int(month)) for year, month in rows]

    def distinct_range_starts(self, column: ColumnSpec, size: int) -> list[int]:
        statement = tsql.distinct_range_starts(self._source_sql, column, size)  # range indexes
        return [int(row[0]) * size for row in self._fetch_all(statement, what="partition ranges")]

    # -- reads -----------------------------------------------------------------------------------------

    def _key_columns(self) -> list[str]:
        if self._keys is None:
            if self._spec.query:
                self._keys = []
            else:
                rows = self._fetch_all(tsql.primary_key(self._table), what="the primary key")
                self._keys = [str(row[0]) for row in rows]
        return self._keys

    def _order_by(self) -> list[str]:
        return order_columns(self._describe_full(), self._spec.partitioning.column, self._key_columns())

    def _statement(self, build: Callable[[], tsql.Statement], bounds: PartitionBounds) -> tsql.Statement:
        try:
            return build()
        except tsql.SqlBuildError as exc:
            raise DponeError(
                ErrorCode.SOURCE_READ_FAILED,
                f"partition {bounds.label} cannot be expressed as a T-SQL predicate",
                details=self._details(partition=bounds.label),
            ) from exc

    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        schema = self.describe()  # before any extraction: unsupported types and missing tables raise here
        order = self._order_by()
        statement = self._statement(
            lambda: tsql.select_rows(self._source_sql, schema.names, bounds, order), bounds
        )
        return self._stream(partition_id, schema, statement, chunk_rows, bounds.label)

    def _stream(
        self, partition_id: str, schema: TableSchema, statement: tsql.Statement, chunk_rows: int, label: str
    ) -> Iterator[ColumnChunk]:
        coarse = self._coarse
        builder = ChunkBuilder(
            partition_id, schema, lambda name: coarse or mssql_types.needs_coercion(schema.column(name))
        )
        connection = self._connect()
        self._readers.add(connection)
        cursor = connection.cursor()
        try:
            try:
                cursor.execute(statement.render())
                yield from stream_chunks(cursor.fetchmany, builder, chunk_rows)
            except pymssql.Error as exc:
                number = error_number(exc)
                unconvertible = number == TEXT_NOT_CONVERTIBLE
                raise DponeError(
                    ErrorCode.SOURCE_READ_FAILED,
                    f"reading partition {label} from source table {self._spec.table} failed"
                    + (": it holds text the driver cannot convert to UTF-8" if unconvertible else ""),
                    details=self._details(
                        partition=label,
                        sql_error_number=number,
                        **({"reason": "text_not_convertible"} if unconvertible else {}),
                    ),
                    hint_lines=_UNCONVERTIBLE_HINTS if unconvertible else (),
                ) from exc
        finally:
            self._readers.discard(connection)
            _close_quietly(connection)

    def count(self, bounds: PartitionBounds) -> int:
        statement = self._statement(lambda: tsql.count_rows(self._source_sql, bounds), bounds)
        rows = self._fetch_all(statement, what=f"the row count of partition {bounds.label}")
        return int(rows[0][0])

    def count_partitions(self, bounds: Sequence[PartitionBounds]) -> list[int]:
        """Rows now within each of ``bounds``, in order: one grouped query (see ``partition_counts``)."""
        self.describe()
        column = planning.partition_column(self._spec.partitioning, self._describe_full())
        grouping = grouped.grouping_for(self._spec.partitioning, column)
        return grouped.assemble(bounds, grouping, self._grouped_counts, self.count)

    def _grouped_counts(self, grouping: grouped.Grouping) -> dict[str, int]:
        statement = grouped.mssql_statement(self._source_sql, grouping)
        rows = self._fetch_all(statement, what="the row counts per partition")
        return grouped.mssql_counts(grouping, rows)

    def key_columns(self) -> list[str]:
        """``KeyFingerprintingSource``: the table's primary key (``[]`` for a query or a table without one)."""
        return list(self._key_columns())

    def key_fingerprints(
        self, bounds: Sequence[PartitionBounds], columns: Sequence[str]
    ) -> list[KeyFingerprint]:
        """``KeyFingerprintingSource``: one grouped statement over the batch (see ``key_fingerprints``)."""
        profiling.require_bounds(bounds)
        statement = self._statement(
            lambda: fingerprints.mssql_statement(self._source_sql, bounds, columns), bounds[0]
        )
        rows = self._fetch_all(statement, what="the key fingerprints")
        return fingerprints.exact_fingerprints(rows, bounds, columns, self._spec.table, self._details())

    def profile(self, bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> ColumnProfile:
        """Exact quality metrics of the rows that reads of ``bounds`` return (see ``profiling``)."""
        schema = self.describe()
        names = profiling.profile_columns(schema, columns, self._spec.table)
        row = self._aggregate_row(
            bounds,
            lambda: profiling.mssql_profile(self._source_sql, bounds, names, schema),
            "the quality profile",
        )
        return profiling.profile_from_row(row, names, self._spec.table)

    def count_nulls(self, bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> dict[str, int]:
        """NULLs per column in the rows that reads of ``bounds`` return (``NullCountingSource``)."""
        names = profiling.null_count_columns(self.describe(), columns, self._spec.table)
        row = self._aggregate_row(
            bounds, lambda: profiling.mssql_null_counts(self._source_sql, bounds, names), "the NULL counts"
        )
        return profiling.null_counts_from_row(row, names, self._spec.table)

    def _aggregate_row(
        self, bounds: Sequence[PartitionBounds], build: Callable[[], tsql.Statement], what: str
    ) -> Sequence[object]:
        """The one row of an aggregate over the union of ``bounds`` (``build``: its statement), read as
        every partition read is (:meth:`_statement`): the quality profile's and the NULL counts'."""
        profiling.require_bounds(bounds)
        return self._fetch_all(self._statement(build, bounds[0]), what=what)[0]

    def lists_stored_otherwise(self, bounds: Sequence[PartitionBounds]) -> list[PartitionBounds]:
        """``ListSpellingSource``: each text ``list`` partition's column read until a row is stored under
        another spelling (see ``list_spelling``); one column, in bounded batches."""
        return [
            one
            for one in list_spelling.text_lists(bounds, self.describe())
            if self._any_listed_value(one, list_spelling.stored_otherwise)
        ]

    def delivers_spelling(self, bounds: PartitionBounds) -> bool:
        """``ListSpellingSource``: the partition's column read in batches until a value arrives spelled
        exactly as listed (the collation's own comparison would fold what this must tell apart)."""
        if not list_spelling.text_lists([bounds], self.describe()):
            return True  # numbers, UUIDs, dates: compared by value here and in the target alike
        return self._any_listed_value(bounds, list_spelling.spelled_as_listed)

    def _any_listed_value(
        self, bounds: PartitionBounds, found: Callable[[object, PartitionBounds], bool]
    ) -> bool:
        """Whether the partition's read delivers a value of its list column that ``found`` accepts: the
        column read in bounded batches, on a connection of its own (closing it ends a read left unfinished)."""
        statement = self._statement(
            functools.partial(list_spelling.mssql_statement, self._source_sql, bounds), bounds
        )
        connection = self._connect()
        try:
            cursor = connection.cursor()
            cursor.execute(statement.render())
            while batch := cursor.fetchmany(_SPELLING_BATCH):
                if any(found(row[0], bounds) for row in batch):
                    return True
            return False
        except pymssql.Error as exc:
            raise self._classified(exc, f"the values of partition {bounds.label}") from exc
        finally:
            _close_quietly(connection)

    def audit_values(self, bounds: Sequence[PartitionBounds], limits: ValueLimits | None) -> None:
        """Before arming: calendar ranges, sub-second digits and offset partitions (see ``value_audit``)."""
        schema = self.describe()
        coarse_checks = self._coarse_checks(schema, bounds) if self._coarse and bounds else []
        offset = value_audit.mssql_offset_partition(schema, bounds)
        if offset is not None:
            raise value_audit.refusal(offset, value_audit.UTC_OFFSET, None, self._spec.table)
        checks = value_audit.mssql_checks(schema, limits) + coarse_checks
        if not checks or not bounds:
            return
        statement = self._statement(
            lambda: value_audit.mssql_statement(self._source_sql, checks, bounds), bounds[0]
        )
        row = self._fetch_all(statement, what="the value audit")[0]
        value_audit.require_clean(checks, row, self._spec.table)

    def _coarse_checks(
        self, schema: TableSchema, bounds: Sequence[PartitionBounds]
    ) -> list[value_audit.Check]:
        """What a coarse description leaves open, asked of each column's first non-NULL value in the
        partitions (one ``TOP 1`` read per binary or number column; a column holds one SQL Server type): a
        binary column holding times or datetimes stops the run at once (digits past microseconds would be
        cut unseen); a number column holding integers is checked for values past 2**53, which its
        ``Float64`` would refuse inside the target call."""
        checks: list[value_audit.Check] = []
        for column in schema.columns:
            if column.source_type not in (mssql_types.COARSE_BINARY, mssql_types.COARSE_NUMBER):
                continue
            statement = self._statement(
                functools.partial(value_audit.mssql_first_value, self._source_sql, column, bounds), bounds[0]
            )
            rows = self._fetch_all(statement, what="the value audit")
            first = rows[0][0] if rows else None
            if column.source_type == mssql_types.COARSE_BINARY and value_audit.is_clock_value(first):
                raise value_audit.refusal(column, value_audit.UNKNOWN_PRECISION, None, self._spec.table)
            if type(first) is int:
                checks.append(value_audit.mssql_beyond_float(column))
        return checks

    def close(self) -> None:
        for connection in list(self._readers):
            _close_quietly(connection)
        self._readers.clear()
        if self._meta is not None:
            _close_quietly(self._meta)
            self._meta = None


def _close_quietly(connection: Any) -> None:
    try:
        connection.close()
    except Exception:  # closing a dead connection must never hide the error that killed it
        log.debug("closing a SQL Server connection failed", exc_info=True)


def _as_date(value: object) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])
