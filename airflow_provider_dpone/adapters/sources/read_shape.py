"""Which columns a read returns, and the order that makes it deterministic (shared by all sources).

Every manifest field that names a source column (``source.columns``, ``source.incremental.cursor``,
``source.partitioning.column``) is checked here, against the columns the source itself described, when a
source first describes its read (:func:`read_schema`): a run calls ``describe()`` before it plans
partitions or writes any checkpoint, so a misspelled name is ``manifest_invalid`` (exit 2) and never
reaches the guarded target call, where it would leave the route blocked. ``sink.order_by`` is checked
the same way by the sink's ``prepare_target``, before any checkpoint or statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import PartitionKind, SourceSpec
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema, require_column

#: The suffix SQLite strips from, and then appends to, a colliding column name (``id`` -> ``id:1``).
_SQLITE_SUFFIX = re.compile(r":[0-9]+\Z")


class DescribedColumns:
    """The columns a source described, with those whose type has no mapping set aside: such a column stops a
    run only when the read needs it (every column, or one the manifest names), so a table with an ``xml``
    or a too-wide ``NUMERIC`` column moves when ``source.columns`` leaves it out, as the error advises."""

    def __init__(self) -> None:
        self.columns: list[ColumnSpec] = []
        self.unsupported: dict[str, DponeError] = {}

    def add(self, name: str, describe: Callable[[], ColumnSpec]) -> None:
        if not name:  # SQLite admits a column named "" in a table too (an internal error before)
            raise unnamed_column(len(self.columns) + len(self.unsupported) + 1)
        try:
            self.columns.append(describe())
        except DponeError as err:
            if err.code is not ErrorCode.UNSUPPORTED_COLUMN_TYPE:
                raise
            self.unsupported.setdefault(name, err)

    def schema(self) -> TableSchema:
        if not self.columns and self.unsupported:
            raise next(iter(self.unsupported.values()))
        return checked_schema(self.columns)


def checked_schema(columns: Sequence[ColumnSpec]) -> TableSchema:
    """A described schema, refusing unnamed columns and repeated ones.

    Names are compared ignoring case: ClickHouse would keep ``id`` and ``ID`` apart, but SQL Server and
    SQLite fold case, so a read of both from the source (``SELECT ... FROM (query)``) is ambiguous there.
    """
    seen: dict[str, str] = {}
    for position, column in enumerate(columns, start=1):
        earlier = seen.get(column.name.casefold())
        if earlier is not None:
            raise duplicate_column(column.name, earlier, position)
        seen[column.name.casefold()] = column.name
    if not columns:
        raise DponeError(ErrorCode.MANIFEST_INVALID, "the source returns no columns")
    return TableSchema(columns=tuple(columns))


def duplicate_column(name: str, earlier: str, position: int) -> DponeError:
    same = name == earlier
    return DponeError(
        ErrorCode.MANIFEST_INVALID,
        f"the source returns column {name!r} twice"
        + ("" if same else f" (as {earlier!r} and {name!r}; names are compared ignoring case)")
        + "; alias one of them in source.query",
        details={"field": "source.query", "column": name, "position": position},
    )


def refuse_sqlite_renamed_duplicates(names: Sequence[str]) -> None:
    """A SQLite query's columns as a view reports them. SQLite renames the later of two names that collide
    (ignoring ASCII case) to the earlier one, less a trailing ``:<digits>``, plus ``:1``, ``:2`` ...; such a
    name would reach the target as a column the source does not have. Refuse it. (A query that aliases
    ``id:1`` beside ``id`` on purpose is refused too: SQLite reports both spellings alike.)"""
    seen: dict[str, str] = {}
    for position, name in enumerate(names, start=1):
        stem = _SQLITE_SUFFIX.sub("", name).casefold()
        earlier = seen.get(stem)
        if earlier is not None and _SQLITE_SUFFIX.search(name):
            raise duplicate_column(earlier, earlier, position)
        seen.setdefault(stem, name)


def read_schema(
    full: TableSchema, spec: SourceSpec, unsupported: Mapping[str, DponeError] | None = None
) -> TableSchema:
    """The columns a read returns (``source.columns``, in that order, or every column), after checking
    every manifest field that names a source column against ``full``, the columns the source described.
    ``unsupported``: described columns without a mapping (left out of ``full``), refused here only when the
    read needs them."""
    partition = spec.partitioning.column if spec.partitioning.kind is not PartitionKind.NONE else None
    if unsupported:
        cursor = spec.incremental.cursor if spec.incremental is not None else None
        needed = [partition, cursor, *(spec.columns if spec.columns is not None else unsupported)]
        for name in needed:
            if name is not None and name in unsupported:
                raise unsupported[name]
    if partition is not None:
        require_column(full, "source.partitioning.column", partition)
    schema = project(full, spec.columns)
    if spec.incremental is not None:
        cursor = spec.incremental.cursor
        if cursor not in schema.names and cursor in full.names:
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                f"source.incremental.cursor names column {cursor!r}, which source.columns leaves out; "
                "list it in source.columns",
                details={"field": "source.incremental.cursor", "column": cursor},
            )
        require_column(schema, "source.incremental.cursor", cursor)
    return schema


def unnamed_column(position: int) -> DponeError:
    return DponeError(
        ErrorCode.MANIFEST_INVALID,
        f"column #{position} the source returns has no name; give it an alias in source.query",
        details={"field": "source.query", "position": position},
    )


def project(full: TableSchema, columns: Sequence[str] | None) -> TableSchema:
    """The manifest's ``columns`` (in that order), or every column of the source."""
    if columns is None:
        return full
    return checked_schema([require_column(full, "source.columns", name) for name in columns])


def order_columns(full: TableSchema, partition_column: str | None, key_columns: Sequence[str]) -> list[str]:
    """Partition column, then the primary key (or the first column): stable chunk order across runs."""
    order: list[str] = []
    for name in (partition_column, *(key_columns or full.names[:1])):
        if name and name not in order:
            order.append(name)
    return order
