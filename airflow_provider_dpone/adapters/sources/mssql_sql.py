"""T-SQL text for the SQL Server source: bracket quoting, partition predicates, reads, counts, probes.

Statements are built as fragments around ``%s`` placeholders plus a parameter tuple (``Statement``), so
values never enter SQL by string concatenation. They are bound by :meth:`Statement.render` with the same
quoting pymssql applies (pymssql substitutes parameters on the client, it has no server-side binding),
but only at the placeholders built here: pymssql's own substitution scans the whole text for ``%s`` and
``%d`` and would also rewrite them inside a user's query (``LIKE '%sales%'``) or a bracketed name.

Date bounds are compared as ``CAST(%s AS DATE)`` with an ISO ``YYYY-MM-DD`` value: ``date`` parses ISO
text the same way under every ``SET LANGUAGE``/``DATEFORMAT`` (``datetime`` does not), and the cast sits on
the value side, so the column stays bare and an index on it can still be used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_dpone.adapters.bounds_sql import bounds_condition
from airflow_provider_dpone.adapters.sources.definition_compare import merged_regions
from airflow_provider_dpone.adapters.sources.sql_names import SqlBuildError as SqlBuildError
from airflow_provider_dpone.adapters.sources.sql_names import split_qualified_name
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.query_text import statement_text
from airflow_provider_dpone.contracts.schema import ColumnSpec

DEFAULT_SCHEMA = "dbo"
QUERY_ALIAS = "dpone_src"


def quote_ident(name: str) -> str:
    """``[name]`` with ``]`` doubled: any character is then part of the name."""
    if not name or "\x00" in name:
        raise SqlBuildError("an identifier must be non-empty and hold no NUL character")
    return "[" + name.replace("]", "]]") + "]"


def string_literal(value: str) -> str:
    """``N'...'`` with ``'`` doubled (Unicode-safe for nvarchar and varchar columns alike)."""
    if "\x00" in value:
        raise SqlBuildError("a string value holds a NUL character")
    return "N'" + value.replace("'", "''") + "'"


def literal(value: object) -> str:
    """The T-SQL literal of one parameter (integers and strings are all this source binds)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SqlBuildError(f"cannot bind a {type(value).__name__} parameter")
    if isinstance(value, int):
        return str(value)
    return string_literal(value)


@dataclass(frozen=True, slots=True)
class Statement:
    """SQL text split at its placeholders: ``text`` is the ``%s`` form, ``render()`` the bound form."""

    fragments: tuple[str, ...]
    params: tuple[object, ...] = ()

    def __post_init__(self) -> None:
        if len(self.fragments) != len(self.params) + 1:
            raise SqlBuildError("placeholder and parameter counts differ")

    @property
    def text(self) -> str:
        return "%s".join(self.fragments)

    def render(self) -> str:
        out = [self.fragments[0]]
        for value, fragment in zip(self.params, self.fragments[1:], strict=True):
            out.append(literal(value))
            out.append(fragment)
        return "".join(out)

    def __add__(self, other: Statement | str) -> Statement:
        if isinstance(other, str):
            other = Statement((other,))
        joined = (*self.fragments[:-1], self.fragments[-1] + other.fragments[0], *other.fragments[1:])
        return Statement(joined, self.params + other.params)


def sql(text: str = "") -> Statement:
    return Statement((text,))


def param(value: object, cast: str | None = None) -> Statement:
    """One placeholder (optionally ``CAST(%s AS type)``)."""
    if cast is None:
        return Statement(("", ""), (value,))
    return Statement(("CAST(", f" AS {cast})"), (value,))


def join(parts: Sequence[Statement], separator: str) -> Statement:
    out = sql()
    for i, part in enumerate(parts):
        out = out + (separator if i else "") + part
    return out


# -- names -----------------------------------------------------------------------------------------------


def split_name(text: str) -> list[str]:
    """Split ``db.schema.table`` at dots outside ``[...]`` and ``"..."`` quoting; unquote each part."""
    return split_qualified_name(text, {"[": "]", '"': '"'}, doubled={"]", '"'})


@dataclass(frozen=True, slots=True)
class TableRef:
    """A SQL Server table as ``[catalog].[schema].[table]`` (catalog optional, schema ``dbo`` by default)."""

    schema: str
    name: str
    catalog: str | None = None

    @classmethod
    def parse(cls, text: str, default_schema: str = DEFAULT_SCHEMA) -> TableRef:
        parts = split_name(text.strip())
        if not 1 <= len(parts) <= 3 or not all(parts):
            raise SqlBuildError("a table name is [catalog.][schema.]table")
        if len(parts) == 1:
            return cls(default_schema, parts[0])
        if len(parts) == 2:
            return cls(parts[0], parts[1])
        return cls(parts[1], parts[2], parts[0])

    def sql(self) -> str:
        prefix = f"{quote_ident(self.catalog)}." if self.catalog else ""
        return f"{prefix}{quote_ident(self.schema)}.{quote_ident(self.name)}"

    def information_schema(self, view: str) -> str:
        prefix = f"{quote_ident(self.catalog)}." if self.catalog else ""
        return f"{prefix}INFORMATION_SCHEMA.{view}"


def source_sql(table: TableRef, query: str | None) -> str:
    """What a read selects from: the table, or the configured query as a derived table."""
    if query is None:
        return table.sql()
    return f"(\n{statement_text(query, nested_comments=True)}\n) AS {quote_ident(QUERY_ALIAS)}"


# -- predicates ------------------------------------------------------------------------------------------

_CASTS = {"date": "DATE", "datetime": "DATETIME2"}


def _bound(value: str, value_type: str) -> Statement:
    if value_type == "integer":
        try:
            return param(int(value.strip()))
        except ValueError:
            raise SqlBuildError("integer bound is not an integer") from None
    cast = _CASTS.get(value_type)
    return param(value, cast)


class _MssqlBounds:
    """SQL Server's half of :func:`bounds_condition`: ``%s`` parameters, calendar values cast on the server."""

    def compare(self, column: str, operator: str, value: str, value_type: str) -> Statement:
        return sql(f"{quote_ident(column)} {operator} ") + _bound(value, value_type)

    def all_of(self, parts: Sequence[Statement]) -> Statement:
        return join(parts, " AND ")

    def member(self, column: str, values: Sequence[str], value_type: str) -> Statement:
        return sql(f"{quote_ident(column)} IN (") + join([_bound(v, value_type) for v in values], ", ") + ")"

    def nothing(self) -> Statement:
        return sql("1 = 0")

    def invalid(self, reason: str) -> Exception:
        return SqlBuildError(reason)


_DIALECT = _MssqlBounds()


def predicate(bounds: PartitionBounds) -> Statement | None:
    """``WHERE`` condition of one partition (``None`` for the whole table)."""
    return bounds_condition(bounds, _DIALECT)


def any_of(bounds: Sequence[PartitionBounds]) -> Statement | None:
    """The union of several partitions' predicates; ``None`` when one is the whole table, or there are none."""
    parts: list[Statement] = []
    for one in bounds:
        condition = predicate(one)
        if condition is None:
            return None
        parts.append(sql("(") + condition + ")")
    return join(parts, " OR ") if parts else None


def _where(bounds: PartitionBounds | None) -> Statement:
    condition = predicate(bounds) if bounds is not None else None
    return sql() if condition is None else sql("\nWHERE ") + condition


# -- statements ------------------------------------------------------------------------------------------


def select_rows(
    source: str, columns: Sequence[str], bounds: PartitionBounds, order_by: Sequence[str]
) -> Statement:
    select_list = ", ".join(quote_ident(c) for c in columns)
    order = ", ".join(quote_ident(c) for c in order_by)
    statement = sql(f"SELECT {select_list}\nFROM {source}") + _where(bounds)
    return statement + (f"\nORDER BY {order}" if order else "")


def count_rows(source: str, bounds: PartitionBounds) -> Statement:
    return sql(f"SELECT COUNT_BIG(*) AS row_count\nFROM {source}") + _where(bounds)


def describe_table(table: TableRef) -> Statement:
    return (
        sql(
            "SELECT COLUMN_NAME, DATA_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE\n"
            f"FROM {table.information_schema('COLUMNS')}\nWHERE TABLE_SCHEMA = "
        )
        + param(table.schema)
        + " AND TABLE_NAME = "
        + param(table.name)
        + "\nORDER BY ORDINAL_POSITION"
    )


def primary_key(table: TableRef) -> Statement:
    return (
        sql(
            "SELECT kcu.COLUMN_NAME\n"
            f"FROM {table.information_schema('TABLE_CONSTRAINTS')} AS tc\n"
            f"JOIN {table.information_schema('KEY_COLUMN_USAGE')} AS kcu\n"
            "  ON kcu.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND kcu.CONSTRAINT_NAME = tc.CONSTRAINT_NAME\n"
            "WHERE tc.CONSTRAINT_TYPE = 'PRIMARY KEY' AND tc.TABLE_SCHEMA = "
        )
        + param(table.schema)
        + " AND tc.TABLE_NAME = "
        + param(table.name)
        + "\nORDER BY kcu.ORDINAL_POSITION"
    )


def describe_query(query: str) -> Statement:
    """Exact result types of a query (SQL Server 2012+), without running it."""
    return (
        sql(
            "SELECT name, system_type_name, is_nullable, precision, scale, error_number\n"
            "FROM sys.dm_exec_describe_first_result_set("
        )
        + param(query)
        + ", NULL, 0)\nORDER BY column_ordinal"
    )


def first_zero_rows(source: str) -> Statement:
    """``TOP 0``: names and wire types only (for servers without the describe DMV)."""
    return sql(f"SELECT TOP 0 *\nFROM {source}")


def calendar_expression(column: ColumnSpec) -> str:
    """The column as a ``date``: offsets are switched to UTC first, matching how values are converted."""
    quoted = quote_ident(column.name)
    source_type = (column.source_type or "").lower()
    if source_type == "date":
        return quoted
    if source_type == "datetimeoffset":
        return f"CAST(SWITCHOFFSET({quoted}, '+00:00') AS DATE)"
    return f"CAST({quoted} AS DATE)"


#: What a text partition column's value must start with to be placed in a day or month: a zero-padded ISO
#: date. The source selects a day by converting the text to a date, the target by comparing the text, so
#: ``2024-1-5`` or ``20240105`` was read into one day and deleted from another (rows doubled and lost).
ISO_DATE_PREFIX = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]%"


def column_stats(source: str, column: ColumnSpec, *, text_calendar: bool = False) -> Statement:
    """Rows, rows no partition would select (NULL; with ``text_calendar``, text that does not start with
    an ISO date too), and the column's range."""
    quoted = quote_ident(column.name)
    unplaceable = f"COUNT_BIG(*) - COUNT_BIG({quoted})"
    if text_calendar:
        unplaceable += f" + SUM(CASE WHEN {quoted} NOT LIKE '{ISO_DATE_PREFIX}' THEN 1 ELSE 0 END)"
    return sql(
        f"SELECT COUNT_BIG(*) AS row_count, {unplaceable} AS null_count, "
        f"MIN({quoted}) AS lowest, MAX({quoted}) AS highest\nFROM {source}"
    )


def distinct_days(source: str, column: ColumnSpec) -> Statement:
    day = calendar_expression(column)
    return sql(
        f"SELECT DISTINCT {day} AS dpone_day\nFROM {source}\nWHERE {quote_ident(column.name)} IS NOT NULL\n"
        "ORDER BY dpone_day"
    )


def distinct_months(source: str, column: ColumnSpec) -> Statement:
    day = calendar_expression(column)
    return sql(
        f"SELECT DISTINCT YEAR({day}) AS dpone_year, MONTH({day}) AS dpone_month\nFROM {source}\n"
        f"WHERE {quote_ident(column.name)} IS NOT NULL\nORDER BY dpone_year, dpone_month"
    )


def range_index(quoted: str, width: int) -> str:
    """The floored quotient ``col // width`` (its start, ``index * width``, is computed in Python): never
    ``col - col mod width``, which overflows a ``bigint`` below the range holding -2**63 (error 8115)."""
    return f"({quoted} / {width} - CASE WHEN {quoted} % {width} < 0 THEN 1 ELSE 0 END)"


def distinct_range_starts(source: str, column: ColumnSpec, size: int) -> Statement:
    """Distinct range indexes (``range_index``) that hold rows, ascending: the caller multiplies them by
    ``size``. ``size`` is a validated int."""
    quoted = quote_ident(column.name)
    width = int(size)
    if width < 1:
        raise SqlBuildError("range size must be at least 1")
    return sql(
        f"SELECT DISTINCT {range_index(quoted, width)} AS dpone_start\nFROM {source}\n"
        f"WHERE {quoted} IS NOT NULL\nORDER BY dpone_start"
    )


def regions_condition(regions: Sequence[Sequence[PartitionBounds]]) -> Statement:
    """The rows within any of ``regions``, each the rows within every bounds it lists (``1 = 1``: one of
    them is the whole table)."""
    alternatives: list[Statement] = []
    for region in regions:
        parts = [p for p in (predicate(one) for one in region) if p is not None]
        if not parts:
            return sql("1 = 1")
        alternatives.append(sql("(") + join([sql("(") + part + ")" for part in parts], " AND ") + ")")
    return join(alternatives, " OR ")


def rows_left_out(
    earlier: str,
    current: str,
    columns: Sequence[tuple[str, str]],
    regions: Sequence[Sequence[PartitionBounds]],
    casts: Mapping[str, str] | None = None,
) -> Statement:
    """How many rows ``earlier`` (a source, as ``source_sql`` writes it) returns within ``regions`` beyond
    those ``current`` returns, over ``columns`` ((current, earlier) spellings), as multisets: both reads in
    one ``UNION ALL`` (+1 a row of the earlier, -1 of the current), grouped once by the columns (``GROUP BY``
    puts NULLs in one group; a join on ``=`` would not match them), each group's surplus summed. ``EXCEPT``
    counted distinct rows: a row the earlier read returned twice, or one equal to a kept row on the columns
    left, went unseen. ``casts``: the type a column is compared as, by its current spelling (``text`` as
    ``varchar(max)``: ``GROUP BY`` refuses text, ntext and xml); adjacent ranges are one
    (``merged_regions``)."""
    condition = regions_condition(merged_regions(regions))
    wanted = casts or {}
    keys = [quote_ident(f"dpone_c{i}") for i in range(len(columns))]  # a column may be named like the sign

    def selected(name: str, current_name: str, key: str) -> str:
        target = wanted.get(current_name)
        return (
            f"{quote_ident(name)} AS {key}"
            if target is None
            else f"CAST({quote_ident(name)} AS {target}) AS {key}"
        )

    earlier_list = ", ".join(selected(old, new, key) for (new, old), key in zip(columns, keys, strict=True))
    current_list = ", ".join(selected(new, new, key) for (new, _), key in zip(columns, keys, strict=True))
    return (
        sql(
            "SELECT COALESCE(SUM([dpone_surplus]), 0) AS left_out\nFROM (\n"
            "SELECT SUM([dpone_sign]) AS [dpone_surplus]\nFROM (\n"
            f"SELECT {earlier_list}, CAST(1 AS bigint) AS [dpone_sign]\nFROM {earlier}\nWHERE "
        )
        + condition
        + f"\nUNION ALL\nSELECT {current_list}, CAST(-1 AS bigint)\nFROM {current}\nWHERE "
        + condition
        + f"\n) AS [dpone_both]\nGROUP BY {', '.join(keys)}\nHAVING SUM([dpone_sign]) > 0\n) AS [dpone_left_out]"
    )
