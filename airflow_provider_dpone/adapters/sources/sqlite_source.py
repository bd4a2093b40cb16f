"""SQLite source (stdlib ``sqlite3``): the embedded default behind ``dpone demo``.

The file is opened read-only (``mode=ro``): a source is never written. Types come from the declared column
types (``sqlite_types``); NOT NULL comes from the NOT NULL flag, or from the primary key where SQLite itself
guarantees it (an ``INTEGER PRIMARY KEY`` is the rowid; ``WITHOUT ROWID`` tables forbid NULL keys; other
primary keys of rowid tables may hold NULL in SQLite, so they stay Nullable).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import Any

from airflow_provider_dpone.adapters.sources import (
    definition_compare,
    list_spelling,
    profiling,
    sqlite_arrow,
    sqlite_arrow_audit,
    sqlite_arrow_driver,
    sqlite_arrow_proving,
    sqlite_compound,
    sqlite_types,
    value_audit,
)
from airflow_provider_dpone.adapters.sources import key_fingerprints as fingerprints
from airflow_provider_dpone.adapters.sources import partition_counts as grouped
from airflow_provider_dpone.adapters.sources import partition_planning as planning
from airflow_provider_dpone.adapters.sources import sqlite_sql as lite
from airflow_provider_dpone.adapters.sources.chunking import ChunkBuilder, stream_chunks
from airflow_provider_dpone.adapters.sources.read_shape import (
    DescribedColumns,
    order_columns,
    read_schema,
    refuse_sqlite_renamed_duplicates,
)
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.key_fingerprint import (
    KeyFingerprint,
)
from airflow_provider_dpone.contracts.manifest import PartitionKind, SourceSpec
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.query_text import statement_text
from airflow_provider_dpone.contracts.read_definition import LeftOutCounts, NotCompared, ReadDefinition
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.ports.source import (
    ColumnProfile,
    DefinitionsNotComparable,
    ValueLimits,
    ValuesUnproven,
)

log = logging.getLogger(__name__)

#: Rows per driver batch of the Arrow audit. The audit's memory stays flat with it (1M demo rows: 0.62-0.68 s,
#: as with 65,536-row batches, whose peak moved by up to 20 MB between table sizes; 8,192: 0.72-0.75 s).
AUDIT_BATCH_ROWS = 16_384

#: A 10-character prefix that ``GLOB sqlite_sql.ISO_DATE_GLOB`` accepts (ASCII digits only, like GLOB).
_ISO_DATE_PREFIX = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def audit_workers() -> int:
    """Connections the pre-arm value audit reads with at once: the cores this process may use, at most 4.

    SQLite evaluates the audit's per-row checks in C with the GIL released, so N range scans on N
    connections run on N cores (1M demo rows on 2 cores: 1.58 -> 1.02 s); more connections than cores only
    contend (3 and 4 measured slower than 2 on 2 cores)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def _clean_facts(schema: TableSchema) -> dict[str, int]:
    """The storage facts of a run proven clean: no column holds a value of another storage class."""
    return {fact.column: 0 for fact in value_audit.storage_facts(schema)}


class SqliteSource:
    """The ``Source`` port over one SQLite table (or a query over it)."""

    def __init__(
        self,
        path: str | Path,
        spec: SourceSpec,
        *,
        audit_connections: int | None = None,
        arrow_read: bool | None = None,
    ) -> None:
        try:
            self._table = lite.TableRef.parse(spec.table)
        except lite.SqlBuildError:
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                "source.table is not a SQLite table name ([schema.]table)",
                details={"table": spec.table},
            ) from None
        self._path = Path(path)
        self._spec = spec
        self._audit_connections = audit_workers() if audit_connections is None else max(1, audit_connections)
        self._source_sql = lite.source_sql(self._table, spec.query)
        self._connection: sqlite3.Connection | None = None
        self._full: TableSchema | None = None
        #: described columns whose type has no mapping (``DescribedColumns``)
        self._unsupported: dict[str, DponeError] = {}
        self._schema: TableSchema | None = None
        self._compound_checked = False
        self._keys: list[str] = []
        #: the table's key is one column without an index of its own (read once, by ``_describe_table``)
        self._single_unindexed_key = False
        #: whether a TEXT column holds only text (a table's affinity); None until asked
        self._text_affinity: bool | None = None
        #: (column, placeable 10-character prefixes) from the last calendar ``column_stats`` of a plan
        self._calendar_prefixes: tuple[str, list[str]] | None = None
        self._arrow = sqlite_arrow_driver.wanted() if arrow_read is None else arrow_read
        #: idle driver connections: each Arrow read takes one (or opens one) and gives it back after
        self._arrow_idle: list[Any] = []
        #: driver connections of reads that failed: never reused, closed with the source (``_arrow_connection``)
        self._arrow_spent: list[Any] = []
        self._arrow_lock = threading.Lock()
        #: the partitions the last value audit proved the Arrow read for, and that read's plan
        self._arrow_proven: tuple[frozenset[PartitionBounds], sqlite_arrow.ArrowPlan] | None = None
        #: set by ``prove_while_reading``: the Arrow reads of ``_arrow_proven`` prove their own values
        self._proving: sqlite_arrow_proving.ProvingRead | None = None

    # -- connection ------------------------------------------------------------------------------------

    def _details(self, **extra: object) -> dict[str, object]:
        return {"table": self._spec.table, "file": self._path.name, **extra}

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = self._open()
        return self._connection

    def _open(self) -> sqlite3.Connection:
        """A new read-only connection to the file (``source_unreachable`` when it cannot be read)."""
        uri = self._path.resolve().as_uri() + "?mode=ro"
        try:
            connection = sqlite3.connect(
                uri, uri=True, check_same_thread=False, timeout=sqlite_arrow_driver.BUSY_TIMEOUT_S
            )
            try:
                value_audit.register_functions(connection)
                connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except BaseException:
                connection.close()
                raise
        except sqlite3.Error as exc:
            raise DponeError(
                ErrorCode.SOURCE_UNREACHABLE,
                f"cannot open the SQLite source file {self._path.name!r}",
                details=self._details(),
            ) from exc
        return connection

    def _table_missing(self) -> DponeError:
        return DponeError(
            ErrorCode.SOURCE_TABLE_MISSING,
            f"source table {self._spec.table} does not exist in {self._path.name!r}",
            details=self._details(),
        )

    def _classified(self, exc: sqlite3.Error, what: str) -> DponeError:
        if "no such table" in str(exc).lower():
            return self._table_missing()
        return DponeError(
            ErrorCode.SOURCE_READ_FAILED,
            f"reading {what} from source table {self._spec.table} failed",
            details=self._details(),
        )

    def _fetch_all(self, statement: tuple[str, tuple[object, ...]], *, what: str) -> list[Any]:
        try:
            return self._db().execute(*statement).fetchall()
        except sqlite3.Error as exc:
            raise self._classified(exc, what) from exc

    def _first_rows(self, statements: Sequence[tuple[str, tuple[object, ...]]], *, what: str) -> list[Any]:
        """The first row of each statement, in order; with several, at once, each on a read-only connection
        of its own (a connection is used by one thread at a time). A failure is raised after every
        statement ended: the first in order, as ``_fetch_all`` classifies it."""
        workers = min(self._audit_connections, len(statements))
        if workers <= 1:
            return [self._fetch_all(statement, what=what)[0] for statement in statements]

        def first_row(statement: tuple[str, tuple[object, ...]]) -> Any:
            connection = self._open()
            try:
                return connection.execute(*statement).fetchall()[0]
            except sqlite3.Error as exc:
                raise self._classified(exc, what) from exc
            finally:
                connection.close()

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpone-audit") as pool:
            futures = [pool.submit(first_row, statement) for statement in statements]
            return [future.result() for future in futures]

    # -- describe --------------------------------------------------------------------------------------

    def _describe_full(self) -> TableSchema:
        if self._full is None:
            self._full = self._describe_query() if self._spec.query else self._describe_table()
        return self._full

    def _describe_table(self) -> TableSchema:
        rows = self._fetch_all(lite.table_info(self._table), what="the column list")
        if not rows:
            raise self._table_missing()
        is_view, without_rowid = self._table_kind()
        self._text_affinity = not is_view
        keys = [(pk, name) for name, _, _, pk in rows if pk]
        # a key with an index of its own is no rowid alias (``INTEGER PRIMARY KEY DESC``: SQLite's quirk)
        single_key = self._single_unindexed_key = len(keys) == 1 and not self._key_has_own_index()
        described = DescribedColumns()
        for name, declared, not_null, pk in rows:
            rowid_alias = bool(pk) and single_key and str(declared).strip().upper() == "INTEGER"
            guaranteed = bool(not_null) or rowid_alias or (bool(pk) and without_rowid)
            described.add(
                str(name),
                functools.partial(sqlite_types.column_spec, str(name), str(declared or ""), guaranteed),
            )
        self._keys = [str(name) for _, name in sorted(keys)]
        self._unsupported = described.unsupported
        return described.schema()

    def _key_has_own_index(self) -> bool:
        """The primary key has an automatic index (``origin = 'pk'``), which a rowid alias never has: an
        ``INTEGER PRIMARY KEY DESC`` column constraint is an ordinary column that may hold ``'abc'``, 2.5
        or NULL, though its declaration reads like an alias."""
        rows = self._fetch_all(
            (
                "SELECT 1 FROM pragma_index_list(?, ?) WHERE origin = 'pk'",
                (self._table.name, self._table.schema or "main"),
            ),
            what="the column list",
        )
        return bool(rows)

    def _table_kind(self) -> tuple[bool, bool]:
        """Whether the named table is a view, and whether it is ``WITHOUT ROWID``: one catalog row."""
        try:
            rows = (
                self._db()
                .execute(
                    # one argument: the table; a schema compares as SQLite compares names (``MAIN.v`` is main's)
                    "SELECT type, wr FROM pragma_table_list(?) WHERE schema = ? COLLATE NOCASE",
                    (self._table.name, self._table.schema or "main"),
                )
                .fetchall()
            )
        except sqlite3.Error:  # SQLite before 3.37 has no table_list; such tables are rare, stay Nullable
            return self._is_view(), False
        return bool(rows and rows[0][0] == "view"), bool(rows and rows[0][1])

    def _needs_coercion(self, column: ColumnSpec) -> bool:
        """``sqlite_types.needs_coercion``, and every String column of a view or a query: a TEXT column's
        affinity turns numbers into text where a *table* stores them, but a view's or query's column (a
        UNION's later arm, a CASE) hands a REAL over as a REAL, which the Arrow read, pinned to text, printed
        as ``1.234568e+02`` (exit 0). Such columns are counted like untyped ones: text moves in Arrow, a
        number takes the row read's exact text of it."""
        if sqlite_types.needs_coercion(column):
            return True
        return column.clickhouse_type == "String" and not self._text_is_text()

    def _text_is_text(self) -> bool:
        if self._text_affinity is None:
            self._text_affinity = not self._spec.query and not self._table_kind()[0]
        return self._text_affinity

    def _require_no_rounded_integers(self, schema: TableSchema) -> None:
        """Before arming, once a run: a compound query's (or view's) column whose integers SQLite turns into
        doubles when it reads the query as a subquery, as every partition read does (``sqlite_compound``)."""
        if self._compound_checked:
            return
        select = self._compound_select()
        if select is not None:
            described = self._describe_full().columns
            try:
                found = sqlite_compound.converted_column(
                    self._db(), select, [c.clickhouse_type for c in described]
                )
            except sqlite3.Error as exc:
                raise self._classified(exc, "the compound query's values") from exc
            if found is not None and described[found].name in schema.names:
                raise value_audit.refusal(
                    schema.column(described[found].name),
                    value_audit.ROUNDED_BY_SUBQUERY,
                    None,
                    self._spec.table,
                )
        self._compound_checked = True

    def _compound_select(self) -> str | None:
        """The SELECT of the query, or of the view the table is, where it may be compound; else None."""
        if self._spec.query is not None:
            query = statement_text(self._spec.query)
            return query if sqlite_compound.is_compound(query) else None
        rows = self._view_rows("sql", what="the view's definition")
        select = sqlite_compound.view_select(str(rows[0][0])) if rows and rows[0][0] else None
        return select if select is not None and sqlite_compound.is_compound(select) else None

    def _is_view(self) -> bool:
        """The catalog's word, where ``pragma_table_list`` is missing (SQLite before 3.37)."""
        return bool(self._view_rows("1", what="the column list"))

    def _view_rows(self, column: str, *, what: str) -> list[Any]:
        """``column`` of the catalog's row of the view the table is (none: it is no view)."""
        schema = lite.quote_ident(self._table.schema or "main")
        master = "sqlite_temp_master" if (self._table.schema or "").lower() == "temp" else "sqlite_master"
        statement = f"SELECT {column} FROM {schema}.{master} WHERE type = 'view' AND name = ? COLLATE NOCASE"
        return self._fetch_all((statement, (self._table.name,)), what=what)

    def _describe_query(self) -> TableSchema:
        """A temporary view over the query: SQLite then reports each column's declared type (the
        underlying column's; expressions have none and become String). Views carry no NOT NULL."""
        assert self._spec.query is not None
        view = f"dpone_describe_{uuid.uuid4().hex}"
        db = self._db()
        try:
            db.execute(f"CREATE TEMP VIEW {lite.quote_ident(view)} AS {statement_text(self._spec.query)}\n")
            try:
                rows = db.execute(
                    "SELECT name, type FROM pragma_table_info(?, 'temp') ORDER BY cid", (view,)
                ).fetchall()
                db.execute(f"SELECT * FROM temp.{lite.quote_ident(view)} LIMIT 0").fetchall()
            finally:
                db.execute(f"DROP VIEW IF EXISTS temp.{lite.quote_ident(view)}")
        except sqlite3.Error as exc:
            raise self._classified(exc, "the query description") from exc
        refuse_sqlite_renamed_duplicates([str(name) for name, _ in rows])  # SELECT id, id -> id, id:1
        described = DescribedColumns()
        for name, declared in rows:
            column = str(name or "")  # a column without a name is refused by add()
            described.add(
                column, functools.partial(sqlite_types.column_spec, column, str(declared or ""), False)
            )
        self._unsupported = described.unsupported
        return described.schema()

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
        on the earlier definition's query (or the table) beside this one's."""
        current = self.read_definition()
        if (earlier.source_type, earlier.table) != (current.source_type, current.table):
            raise DefinitionsNotComparable(NotCompared.OTHER_SOURCE)
        if not regions:
            return LeftOutCounts(total=0, regions=())
        earlier_sql = lite.source_sql(self._table, earlier.query)
        names = self._compared(lite.first_zero_rows(earlier_sql), names_only=True)
        columns = definition_compare.shared_columns(self.describe().names, names, earlier.columns)

        def count(batch: Sequence[Sequence[PartitionBounds]]) -> int:
            statement = self._statement(
                functools.partial(lite.rows_left_out, earlier_sql, self._source_sql, columns, batch),
                batch[0][0],
            )
            return int(self._compared(statement)[0][0])

        return definition_compare.counts_per_region(regions, count)

    def _compared(self, statement: tuple[str, tuple[object, ...]], *, names_only: bool = False) -> list[Any]:
        """``statement`` of a definitions' comparison, run to its end (its rows, or with ``names_only`` the
        names of its columns): an error naming what the file no longer holds means the earlier read cannot
        run (``DefinitionsNotComparable``); any other, also one met while stepping the rows, fails the read."""
        try:
            cursor = self._db().execute(*statement)
            try:
                if names_only:
                    return [str(column[0]) for column in cursor.description or ()]
                return cursor.fetchall()
            finally:
                cursor.close()
        except sqlite3.Error as exc:
            reason = definition_compare.sqlite_reason(exc)
            if reason is not None:
                raise DefinitionsNotComparable(reason) from exc
            raise self._classified(exc, "the comparison of two read definitions") from exc

    # -- planning --------------------------------------------------------------------------------------

    def plan_partitions(self) -> list[PartitionBounds]:
        self.describe()
        self._calendar_prefixes = None  # never reuse a previous plan's scan
        try:
            planned = planning.plan(self._spec.partitioning, self._describe_full(), self)
        finally:
            self._calendar_prefixes = None
        self._require_floats_read_as_written(planned)
        return planned

    def _require_floats_read_as_written(self, planned: Sequence[PartitionBounds]) -> None:
        """A listed value of a float column must be the same double in SQLite as in the target.

        SQLite reads a number text with its own conversion, which is not correctly rounded: ``4912.446821``
        becomes a neighbouring double there, while the target compares the correctly rounded one. Rows
        written as that text then moved again on every run (the target's delete missed them), rows written
        from a program's double were never selected (exit 0 both ways)."""
        partitioning = self._spec.partitioning
        if partitioning.kind is not PartitionKind.LIST:
            return
        spec = planning.partition_column(partitioning, self.describe())
        if spec is None or not spec.clickhouse_type.startswith("Float"):
            return
        column = spec.name
        values = [v for b in planned for v in (b.values or ())]
        for position, value in enumerate(values):
            ((equal,),) = self._fetch_all(
                ("SELECT CAST(? AS REAL) = ?", (value, float(value))), what="the listed values as numbers"
            )
            if not equal:
                raise DponeError(
                    ErrorCode.MANIFEST_INVALID,
                    f"partition value #{position + 1} of float column {column!r} reads as another number in "
                    "SQLite than it is (SQLite's number parsing rounds some texts to a neighbouring double): "
                    "its rows would be selected in the source and missed in the target, or the reverse. "
                    f"List the column as text (CAST({column} AS TEXT) AS {column} in source.query) or "
                    "partition by another column; nothing was written",
                    details={
                        "column": column,
                        "position": position + 1,
                        "problem": "float_value_read_otherwise",
                    },
                )

    def column_stats(self, column: ColumnSpec, kind: PartitionKind) -> planning.ColumnStats:
        if kind in (PartitionKind.DAY, PartitionKind.MONTH):
            return self._calendar_stats(column)
        statement = lite.column_stats(self._source_sql, column, False)
        total, unplaceable, lowest, highest = self._fetch_all(statement, what="partition statistics")[0]
        return planning.ColumnStats(
            rows=int(total), unplaceable=int(unplaceable), lower=lowest, upper=highest
        )

    def _calendar_stats(self, column: ColumnSpec) -> planning.ColumnStats:
        """Rows, unplaceable rows (NULL, not text, no ISO date prefix), min, max and the distinct day
        prefixes, from one grouped scan; the prefixes are kept for ``distinct_days``/``distinct_months``."""
        groups = self._fetch_all(lite.calendar_groups(self._source_sql, column), what="partition statistics")
        total = unplaceable = 0
        prefixes: list[str] = []
        lows: list[str] = []
        highs: list[str] = []
        for prefix, storage, rows, lowest, highest in groups:
            total += int(rows)
            if storage == "text" and isinstance(prefix, str) and _ISO_DATE_PREFIX.fullmatch(prefix):
                prefixes.append(prefix)
                lows.append(lowest)
                highs.append(highest)
            else:
                unplaceable += int(rows)
        self._calendar_prefixes = (column.name, sorted(prefixes))
        return planning.ColumnStats(
            rows=total,
            unplaceable=unplaceable,
            lower=min(lows) if lows else None,
            upper=max(highs) if highs else None,
        )

    def _prefixes(self, column: ColumnSpec, length: int, what: str) -> list[str]:
        cached = self._calendar_prefixes
        if cached is not None and cached[0] == column.name:
            return list(dict.fromkeys(prefix[:length] for prefix in cached[1]))
        rows = self._fetch_all(lite.distinct_prefixes(self._source_sql, column, length), what=what)
        return [str(prefix) for (prefix,) in rows]

    def distinct_days(self, column: ColumnSpec) -> list[date]:
        return [self._iso_date(column, prefix) for prefix in self._prefixes(column, 10, "partition days")]

    def distinct_months(self, column: ColumnSpec) -> list[tuple[int, int]]:
        prefixes = self._prefixes(column, 7, "partition months")
        firsts = [self._iso_date(column, f"{prefix}-01") for prefix in prefixes]
        return [(first.year, first.month) for first in firsts]

    def _iso_date(self, column: ColumnSpec, text: str) -> date:
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise DponeError(
                ErrorCode.SOURCE_READ_FAILED,
                f"partition column {column.name!r} holds text that is not an ISO date",
                details=self._details(column=column.name),
            ) from None

    def distinct_range_starts(self, column: ColumnSpec, size: int) -> list[int]:
        statement = lite.distinct_range_starts(self._source_sql, column, size)  # range indexes
        return [int(row[0]) * size for row in self._fetch_all(statement, what="partition ranges")]

    # -- reads -----------------------------------------------------------------------------------------

    def _statement(
        self, build: Callable[[], tuple[str, tuple[object, ...]]], bounds: PartitionBounds
    ) -> tuple[str, tuple[object, ...]]:
        try:
            return build()
        except lite.SqlBuildError as exc:
            raise DponeError(
                ErrorCode.SOURCE_READ_FAILED,
                f"partition {bounds.label} cannot be expressed as a SQLite predicate",
                details=self._details(partition=bounds.label),
            ) from exc

    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        schema = self.describe()  # before any extraction: unsupported types and missing tables raise here
        order = order_columns(self._describe_full(), self._spec.partitioning.column, self._keys)
        proven = self._arrow_proven
        if proven is not None and bounds in proven[0]:
            # the Arrow read, or (``prove_while_reading``) the Arrow read proving its values
            read: sqlite_arrow.ArrowPlan | sqlite_arrow_proving.ProvingRead = self._proving or proven[1]
            arrow_statement = self._statement(lambda: read.statement(self._source_sql, bounds, order), bounds)
            return self._arrow_stream(partition_id, read, arrow_statement, chunk_rows, bounds.label)
        statement = self._statement(
            lambda: lite.select_rows(self._source_sql, schema.names, bounds, order), bounds
        )
        return self._stream(partition_id, schema, statement, chunk_rows, bounds.label)

    def _arrow_stream(
        self,
        partition_id: str,
        read: sqlite_arrow.ArrowPlan | sqlite_arrow_proving.ProvingRead,
        statement: tuple[str, tuple[object, ...]],
        chunk_rows: int,
        label: str,
    ) -> Iterator[ColumnChunk]:
        """The read of ``_stream`` through the Arrow driver (see ``sqlite_arrow``); the same errors. A
        proving read (``sqlite_arrow_proving``) raises ``ValuesUnproven`` instead, on whatever it cannot
        prove, a driver error included: the value audit then decides."""
        try:
            with (
                self._arrow_connection() as connection,
                sqlite_arrow_driver.batches(connection, statement) as batches,
            ):
                yield from read.chunks(batches, partition_id, chunk_rows)
        except sqlite_arrow_driver.READ_ERRORS as exc:
            if isinstance(read, sqlite_arrow_proving.ProvingRead):
                raise ValuesUnproven("the driver's read") from exc
            raise self._read_failed(label) from exc

    @contextlib.contextmanager
    def _arrow_connection(self) -> Iterator[Any]:
        """A driver connection of this read alone (reads may run at once: ``concurrent_reads``)."""
        with self._arrow_lock:
            connection = self._arrow_idle.pop() if self._arrow_idle else None
        if connection is None:
            connection = sqlite_arrow_driver.connect(self._path)
        try:
            yield connection
        except BaseException:
            # a read that failed or stopped midway: its connection is not reused, and closed only with the
            # source (``close``): closing a driver connection drops the process's locks on the file, also
            # those of ``sqlite3``'s connection (another copy of SQLite), whose reads may then go stale
            with self._arrow_lock:
                self._arrow_spent.append(connection)
            raise
        with self._arrow_lock:
            self._arrow_idle.append(connection)

    def concurrent_reads(self, bounds: Sequence[PartitionBounds]) -> int:
        """When every partition of ``bounds`` takes the Arrow read: ``DPONE_SQLITE_ARROW_READS``, by default
        two (one on a single core), each read on a driver connection of its own; else 1: the ``sqlite3``
        row read shares one connection. The driver reads in C, mostly without the GIL: 1M demo rows read and
        converted in 0.83-1.11 s one partition after the other, 0.58-0.60 s two at once."""
        proven = self._arrow_proven
        if proven is not None and bounds and all(b in proven[0] for b in bounds):
            default = min(sqlite_arrow_driver.DEFAULT_READS, audit_workers())
            return sqlite_arrow_driver.reads_at_once(default)
        return 1

    def _read_failed(self, label: str) -> DponeError:
        return DponeError(
            ErrorCode.SOURCE_READ_FAILED,
            f"reading partition {label} from source table {self._spec.table} failed",
            details=self._details(partition=label),
        )

    def _stream(
        self,
        partition_id: str,
        schema: TableSchema,
        statement: tuple[str, tuple[object, ...]],
        chunk_rows: int,
        label: str,
    ) -> Iterator[ColumnChunk]:
        builder = ChunkBuilder(partition_id, schema, lambda name: self._needs_coercion(schema.column(name)))
        cursor = self._db().cursor()
        try:
            try:
                cursor.execute(*statement)
                yield from stream_chunks(cursor.fetchmany, builder, chunk_rows)
            except sqlite3.Error as exc:
                raise self._read_failed(label) from exc
        finally:
            cursor.close()

    def count(self, bounds: PartitionBounds) -> int:
        statement = self._statement(lambda: lite.count_rows(self._source_sql, bounds), bounds)
        return int(self._fetch_all(statement, what=f"the row count of partition {bounds.label}")[0][0])

    def count_partitions(self, bounds: Sequence[PartitionBounds]) -> list[int]:
        """Rows now within each of ``bounds``, in order: one grouped query (see ``partition_counts``)."""
        self.describe()
        column = planning.partition_column(self._spec.partitioning, self._describe_full())
        grouping = grouped.grouping_for(self._spec.partitioning, column)
        return grouped.assemble(bounds, grouping, self._grouped_counts, self.count)

    def _grouped_counts(self, grouping: grouped.Grouping) -> dict[str, int]:
        statement = grouped.sqlite_statement(self._source_sql, grouping)
        rows = self._fetch_all(statement, what="the row counts per partition")
        return grouped.sqlite_counts(grouping, rows)

    def key_columns(self) -> list[str]:
        """``KeyFingerprintingSource``: the table's primary key (``[]`` for a query or a table without one)."""
        self._describe_full()
        return [] if self._spec.query else list(self._keys)

    def key_fingerprints(
        self, bounds: Sequence[PartitionBounds], columns: Sequence[str]
    ) -> list[KeyFingerprint]:
        """``KeyFingerprintingSource``: one grouped statement over the batch (see ``key_fingerprints``)."""
        profiling.require_bounds(bounds)
        statement = self._statement(
            lambda: fingerprints.sqlite_statement(self._source_sql, bounds, columns), bounds[0]
        )
        rows = self._fetch_all(statement, what="the key fingerprints")
        return fingerprints.exact_fingerprints(rows, bounds, columns, self._spec.table, self._details())

    def profile(self, bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> ColumnProfile:
        """Exact quality metrics of the rows that reads of ``bounds`` return (see ``profiling``)."""
        names = profiling.profile_columns(self.describe(), columns, self._spec.table)
        row = self._aggregate_row(
            bounds, lambda: profiling.sqlite_profile(self._source_sql, bounds, names), "the quality profile"
        )
        return profiling.profile_from_row(row, names, self._spec.table)

    def count_nulls(self, bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> dict[str, int]:
        """NULLs per column in the rows that reads of ``bounds`` return (``NullCountingSource``)."""
        names = profiling.null_count_columns(self.describe(), columns, self._spec.table)
        row = self._aggregate_row(
            bounds, lambda: profiling.sqlite_null_counts(self._source_sql, bounds, names), "the NULL counts"
        )
        return profiling.null_counts_from_row(row, names, self._spec.table)

    def _aggregate_row(
        self,
        bounds: Sequence[PartitionBounds],
        build: Callable[[], tuple[str, tuple[object, ...]]],
        what: str,
    ) -> Sequence[object]:
        """The one row of an aggregate over the union of ``bounds`` (``build``: its statement), read as
        every partition read is (:meth:`_statement`): the quality profile's and the NULL counts'."""
        profiling.require_bounds(bounds)
        return self._fetch_all(self._statement(build, bounds[0]), what=what)[0]  # type: ignore[no-any-return]

    def lists_stored_otherwise(self, bounds: Sequence[PartitionBounds]) -> list[PartitionBounds]:
        """``ListSpellingSource``: one indexed probe per text ``list`` partition (see ``list_spelling``)."""
        found = []
        for one in list_spelling.text_lists(bounds, self.describe()):
            statement = self._statement(
                functools.partial(list_spelling.sqlite_statement, self._source_sql, one), one
            )
            if self._fetch_all(statement, what=f"the values of partition {one.label}"):
                found.append(one)
        return found

    def lists_holding_non_text(self, bounds: Sequence[PartitionBounds]) -> list[PartitionBounds]:
        """``ListSpellingSource``: the text ``list`` partitions of a column without TEXT affinity that holds
        numbers or bytes (one scan; none for a column declared TEXT, CHAR or CLOB: see
        ``list_spelling.sqlite_non_text_statement``)."""
        schema = self.describe()
        texts = list_spelling.text_lists(bounds, schema)
        if not texts or texts[0].column is None:
            return []
        known = {c.name.casefold(): c for c in schema.columns}
        spec = known.get(texts[0].column.casefold())
        if spec is not None and not sqlite_types.needs_coercion(spec):
            return []  # TEXT affinity: every value is text
        statement = self._statement(
            functools.partial(list_spelling.sqlite_non_text_statement, self._source_sql, texts[0].column),
            texts[0],
        )
        return texts if self._fetch_all(statement, what="the stored kinds of the list column") else []

    def delivers_spelling(self, bounds: PartitionBounds) -> bool:
        """``ListSpellingSource``: one probe comparing the read's values byte for byte."""
        if not list_spelling.text_lists([bounds], self.describe()):
            return True  # numbers, UUIDs, dates: compared by value here and in the target alike
        statement = self._statement(
            functools.partial(list_spelling.sqlite_spelled_statement, self._source_sql, bounds), bounds
        )
        return bool(self._fetch_all(statement, what=f"the values of partition {bounds.label}"))

    def audit_values(self, bounds: Sequence[PartitionBounds], limits: ValueLimits | None) -> None:
        """Before arming: aggregates find every value a read would refuse (see ``value_audit``), one range
        scan per group of partitions, the groups on as many connections at once (``audit_workers``)."""
        self._arrow_proven = None
        self._proving = None
        schema = self.describe()
        self._require_no_rounded_integers(schema)
        exempt = self._rowid_alias(schema)
        if self._arrow and bounds and self._arrow_audit_clean(schema, exempt, bounds, limits):
            self._prove_arrow_read(schema, bounds, _clean_facts(schema))
            return
        # the storage facts cost the SQL audit a per-row expression each: counted only when they can prove
        # the Arrow read (a flag or coerced text column rules it out whatever they say)
        counted = self._arrow and sqlite_arrow.readable(schema, self._needs_coercion)
        plan = value_audit.sqlite_plan(schema, bounds, limits, exempt=exempt, with_facts=counted)
        if plan is None:
            return
        statements = [  # never an OR of ranges: SQLite keeps every rowid (see value_audit.merged_ranges)
            self._statement(functools.partial(plan.statement, self._source_sql, [run]), run)
            for run in value_audit.audit_runs(bounds, self._audit_connections)
        ]
        rows = self._first_rows(statements, what="the value audit")
        counts = plan.add_counts(rows)
        whole = len(counts) == len(plan.checks) + len(plan.facts)
        value_audit.require_clean(
            plan.checks, counts[: len(plan.checks)] if whole else counts, self._spec.table
        )
        if plan.facts:
            facts = {fact.column: counts[len(plan.checks) + i] for i, fact in enumerate(plan.facts)}
            self._prove_arrow_read(schema, bounds, facts)

    def prove_while_reading(self, bounds: Sequence[PartitionBounds], limits: ValueLimits | None) -> bool:
        """The Arrow reads of ``bounds`` prove their own values (``sqlite_arrow_proving``) where the audit
        would have proven them in Arrow: the ``file_artifact`` export or the staging read is then the audit.
        ``False`` (the audit runs first) on a column the Arrow audit or the Arrow read does not cover."""
        self._arrow_proven = None
        self._proving = None
        if not (self._arrow and bounds):
            return False
        schema = self.describe()
        self._require_no_rounded_integers(schema)
        audit = sqlite_arrow_audit.audit_read(schema, self._rowid_alias(schema), self._needs_coercion)
        plan = sqlite_arrow.arrow_plan(schema, self._needs_coercion, _clean_facts(schema))
        held = value_audit.held_limits(limits)
        proving = sqlite_arrow_proving.proving_read(plan, audit, held)
        if plan is None or proving is None:
            return False
        self._arrow_proven = (frozenset(bounds), plan)
        self._proving = proving
        return True

    def _prove_arrow_read(
        self, schema: TableSchema, bounds: Sequence[PartitionBounds], facts: dict[str, int]
    ) -> None:
        arrow = sqlite_arrow.arrow_plan(schema, self._needs_coercion, facts)
        if arrow is not None:
            self._arrow_proven = (frozenset(bounds), arrow)

    def _arrow_audit_clean(
        self,
        schema: TableSchema,
        exempt: frozenset[str],
        bounds: Sequence[PartitionBounds],
        limits: ValueLimits | None,
    ) -> bool:
        """Whether the audited columns, read into Arrow, prove the run clean (``sqlite_arrow_audit``): one
        statement per group of partitions, as the SQL audit's, each on a driver connection of its own and
        all at once. The partition column, where an index leads with it, is proven by its distinct values
        first and left out of the read (:meth:`_values_provable`). ``False`` (the SQL audit decides) on
        anything it cannot prove, a driver error too."""
        read = sqlite_arrow_audit.audit_read(schema, exempt, self._needs_coercion)
        if read is None:
            return False
        runs = value_audit.audit_runs(bounds, self._audit_connections)
        by_values = self._values_provable(read)
        held = value_audit.held_limits(limits)

        def proven(run: PartitionBounds) -> bool:
            # a connection of the reads' own: the load after a clean audit takes it up (none opened twice);
            # the values and the rows of one group are read in one snapshot, as one statement read them
            with self._arrow_connection() as connection, sqlite_arrow_driver.snapshot(connection):
                skip: frozenset[str] = frozenset()
                if by_values is not None:
                    statement = self._statement(
                        functools.partial(read.values_statement, self._source_sql, run, by_values), run
                    )
                    with sqlite_arrow_driver.batches(connection, statement, AUDIT_BATCH_ROWS) as batches:
                        verdict = read.values_proven(batches, held, by_values)
                    if verdict is False:
                        return False
                    if verdict:
                        skip = frozenset({by_values.column.name})
                if not read.read(skip):
                    return True  # the column proven by its values was the only one audited
                rows = self._statement(functools.partial(read.statement, self._source_sql, run, skip), run)
                with sqlite_arrow_driver.batches(connection, rows, AUDIT_BATCH_ROWS) as batches:
                    return read.proven(batches, held, skip)

        try:
            with ThreadPoolExecutor(max_workers=min(self._audit_connections, len(runs))) as pool:
                return all(list(pool.map(proven, runs)))
        except sqlite_arrow_driver.READ_ERRORS:
            log.debug("the Arrow audit could not prove the run; the SQL audit decides")
            return False

    def _values_provable(self, read: sqlite_arrow_audit.AuditRead) -> sqlite_arrow_audit.Audited | None:
        """The audited partition column, when its distinct values are a cheap proof: a text column
        (``AuditRead.values_column``) of a table (not a query or view) whose index, not partial, leads with
        it in BINARY order, so the grouping is a walk of that index. Only the cost depends on this: the
        values prove the column whichever way SQLite groups them."""
        column = self._spec.partitioning.column
        if column is None or self._spec.query:
            return None
        audited = next(
            (a for a in read.audited if a.column.name.casefold() == column.casefold()),
            None,
        )
        if audited is None or read.values_column(audited.column.name) is None:
            return None
        schema_name = self._table.schema or "main"
        try:
            indexes = (
                self._db()
                .execute(
                    "SELECT name FROM pragma_index_list(?, ?) WHERE partial = 0",
                    (self._table.name, schema_name),
                )
                .fetchall()
            )
            for (index,) in indexes:
                lead = (
                    self._db()
                    .execute(
                        "SELECT name, coll FROM pragma_index_xinfo(?, ?) WHERE seqno = 0",
                        (index, schema_name),
                    )
                    .fetchall()
                )
                if (
                    lead
                    and str(lead[0][0]).casefold() == audited.column.name.casefold()
                    and lead[0][1] == "BINARY"
                ):
                    return audited
        except sqlite3.Error:
            return None
        return None

    def _rowid_alias(self, schema: TableSchema) -> frozenset[str]:
        """The ``INTEGER PRIMARY KEY`` of a rowid table: SQLite stores only integers there. Exempted only
        when the table provably has a rowid (a ``WITHOUT ROWID`` table's key keeps ``1.5``)."""
        names = {name.lower() for name in self._describe_full().names}
        key = self._keys[0] if self._single_unindexed_key else None  # one key column, no index of its own
        if self._spec.query or key not in schema.names or "rowid" in names:
            return frozenset()
        if (schema.column(key).source_type or "").upper() != "INTEGER":
            return frozenset()
        try:
            self._db().execute(f"SELECT rowid FROM {self._table.sql()} LIMIT 0").fetchall()
        except sqlite3.Error:  # no rowid: WITHOUT ROWID
            return frozenset()
        return frozenset({key})

    def close(self) -> None:
        with self._arrow_lock:
            idle, self._arrow_idle = [*self._arrow_idle, *self._arrow_spent], []
            self._arrow_spent = []
        for connection in idle:
            connection.close()
        if self._connection is not None:
            self._connection.close()
            self._connection = None
