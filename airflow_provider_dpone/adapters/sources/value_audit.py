"""The pre-arm value audit: find, read-only and before anything is written, the values a read would refuse.

On the ``lazy_plan`` + ``direct`` path rows are converted while they stream inside the guarded target
call, so a value refused there (``column_values``) would leave the route ``target_outcome_unknown``
although nothing about the target was ever in doubt. The audit runs one aggregate statement over the
union of the run's partitions before ``prepare_target`` and stops with ``manifest_invalid`` (exit 2, no
checkpoint, the route stays clear), naming the column and the reason, never a value. It also applies the
target's own calendar range (``ValueLimits``: ClickHouse 18.16 reads dates past 2106 as 1970-01-01), which
the converters cannot know. The converters keep refusing as the last line.

On SQLite, ``sqlite_arrow_audit`` tries first to prove a run clean in Arrow; only when it cannot do the
statements here run, and only they ever refuse.

What is checked, per column of the read (only types whose values can be refused):

* SQLite (dynamically typed: the declared type is the contract): integers and flags of another storage
  class or value, floats held as text or integers past 2**53, decimals with more digits than
  ``Decimal(p, s)`` holds (integers by range, REALs by range and ``round`` up to 15 digits and by the
  converters' own rule beyond (``REAL_FITS_FUNCTION``), text by its digits), dates and datetimes that are
  not ISO text, outside the target's range or (datetimes) with sub-second digits; dates whose text carries
  a time of day other than midnight (or an offset); a day/month partition column of type DateTime whose
  values carry a UTC offset (partitioned by the local date, stored as UTC: ``replace_partition`` would miss
  rows); text that is not valid UTF-8 in a String column (both reads refuse it; SQLite never checks what
  it stores). Only text with a byte outside printable ASCII reaches the UTF-8 check (``UTF8_FUNCTION``, a
  Python function every audit connection registers with :func:`register_functions`). Date and datetime
  text that SQLite's own functions accept but that is not canonical (``2026-11-30T10:00:00Z``,
  ``2026-11-30 24:00:00``) is also asked of the converters' own parser (``PARSES_FUNCTION``), so the audit
  never passes a text the read would refuse, whatever the Python version's ``fromisoformat`` accepts.
* SQL Server (typed: only what the mapping can refuse): MIN/MAX of date and datetime columns against the
  target's range, sub-second digits of datetime columns, a seventh fractional digit of ``time`` columns
  (pymssql hands a ``time`` over as Python's ``datetime.time``, which holds microseconds: it drops the
  100-nanosecond digit of ``time(7)``, SQL Server's default precision, without a word), decimals of a coarse
  description wider than its scale; a ``datetimeoffset`` day/month partition column is refused by its type.
  A coarse description (no describe DMV: before 2012) names ``time``, ``datetime2`` and ``datetimeoffset``
  only as binary: each such column's first non-NULL value in the run's partitions is read, and a time or
  datetime is refused (``UNKNOWN_PRECISION``: the scale that would say whether a digit was cut is unknown);
  a "number" column (``Float64``) whose first value is an integer has its values past 2**53 counted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time

from airflow_provider_dpone.adapters.bounds_sql import merge_adjacent
from airflow_provider_dpone.adapters.sources import column_values
from airflow_provider_dpone.adapters.sources import mssql_sql as tsql
from airflow_provider_dpone.adapters.sources import sqlite_sql as lite
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.ports.source import ValueLimits

#: The converters' own range: what a target that reports no limits is held to.
WIDEST = ValueLimits(
    date_min=column_values.DATE_MIN,
    date_max=column_values.DATE_MAX,
    datetime_min=column_values.DATETIME_MIN,
    datetime_max=column_values.DATETIME_MAX,
)

#: Reasons (stable, safe): the ``reason`` detail of the error and the text after "values that".
NOT_INTEGER = "not_an_integer"
NOT_FLAG = "not_a_flag"
NOT_FLOAT = "not_an_exact_float"
DECIMAL_DIGITS = "decimal_digits"
NOT_DATE = "not_an_iso_date"
NOT_DATETIME = "not_an_iso_datetime"
OUT_OF_RANGE = "outside_target_range"
SUB_SECOND = "sub_second_digits"
UTC_OFFSET = "utc_offset_in_partition_column"
NOT_UTF8 = "not_utf8_text"
TIME_IN_DATE = "time_of_day_in_date"
SUB_MICROSECOND = "sub_microsecond_digits"
UNKNOWN_PRECISION = "date_time_of_unknown_precision"
BEYOND_FLOAT = "integer_beyond_float64"
ROUNDED_BY_SUBQUERY = "integer_rounded_by_compound_query"

_TEXTS = {
    NOT_INTEGER: "are not integers",
    NOT_FLAG: "are not 0/1 flags",
    NOT_FLOAT: "are not numbers a Float64 holds exactly",
    DECIMAL_DIGITS: "have more digits than the column's decimal type holds",
    NOT_DATE: "are not ISO dates",
    NOT_DATETIME: "are not ISO datetimes",
    OUT_OF_RANGE: "lie outside the range the target's {type} holds ({low} .. {high})",
    SUB_SECOND: "have sub-second digits, which DateTime does not hold",
    UTC_OFFSET: "carry a UTC offset: the day partition would be their local date but they are stored in UTC",
    NOT_UTF8: "are not valid UTF-8 text",
    TIME_IN_DATE: "carry a time of day (or a UTC offset), which Date does not hold",
    SUB_MICROSECOND: "have a seventh fractional digit (100 ns), which the SQL Server driver cannot read "
    "(it keeps microseconds)",
    BEYOND_FLOAT: "are integers past 2**53, which the Float64 of a server that cannot describe the query's "
    "types (SQL Server before 2012) cannot hold exactly",
    ROUNDED_BY_SUBQUERY: "are integers of a compound query's later arms that SQLite turns into doubles when it "
    "reads the query as a subquery, as every read of a partition does (the first arm's REAL affinity: past "
    "2**53 they round, and text shows 123 as 123.0)",
    UNKNOWN_PRECISION: "are times or datetimes of a server that cannot describe the query's types (SQL Server "
    "before 2012): the driver keeps microseconds and nothing says whether a seventh digit was cut",
}
_HINTS = {
    ROUNDED_BY_SUBQUERY: "CAST the column to one type in every arm of the compound (AS INTEGER, or AS TEXT "
    "to keep every digit), or keep those rows out in source.query",
    SUB_SECOND: "to drop the fraction deliberately, truncate it in source.query (SQL Server: "
    "CAST(col AS datetime2(0)) AS col; SQLite: strftime('%Y-%m-%d %H:%M:%S', col) AS col, which arrives as String)",
    UTC_OFFSET: "partition on UTC: convert the column in source.query "
    "(SQLite: datetime(col) AS col; SQL Server: CAST(SWITCHOFFSET(col, '+00:00') AS datetime2(0)) AS col)",
    DECIMAL_DIGITS: "values are never rounded to fit: widen the declared type, or ROUND/CAST in source.query",
    TIME_IN_DATE: "declare the column DATETIME to keep the time; to drop it deliberately, select "
    "date(col) AS col in source.query (SQLite; it arrives as String) or CAST(col AS date) (SQL Server)",
    SUB_MICROSECOND: "to keep every digit, select CAST(col AS varchar(16)) AS col in source.query (SQL Server's "
    "own text of the time); to drop the digit deliberately, CAST(col AS time(6)) AS col",
    UNKNOWN_PRECISION: "select CAST(col AS varchar(34)) AS col in source.query to move SQL Server's own text "
    "of the value, every digit kept (or CAST(col AS datetime) AS col for a DateTime of whole seconds)",
    BEYOND_FLOAT: "select CAST(col AS decimal(38, 0)) AS col in source.query: a coarse description keeps "
    "decimals exact",
    NOT_UTF8: "the text was stored in another encoding: re-encode it in the source table, or select "
    "CAST(col AS BLOB) AS col in source.query to move the bytes as they are",
}


@dataclass(frozen=True, slots=True)
class Check:
    """One select-list aggregate and the rule that turns its result into a refusal."""

    column: ColumnSpec
    reason: str
    expression: str
    #: the aggregate's result -> rows refused (0: none); MIN/MAX checks return 1 or 0
    refused: Callable[[object], int]
    low: object = None
    high: object = None


def _count(value: object) -> int:
    count: int = int(value or 0)  # type: ignore[call-overload]
    return count


def _sum(condition: str) -> str:
    return f"COALESCE(SUM(CASE WHEN {condition} THEN 1 ELSE 0 END), 0)"


def _calendar_partition_columns(bounds: Sequence[PartitionBounds]) -> set[str]:
    return {
        b.column
        for b in bounds
        if b.kind is BoundsKind.RANGE and b.value_type == "date" and b.column is not None
    }


def held_limits(limits: ValueLimits | None) -> ValueLimits:
    """The range values are held to: the target's, or the converters' own when it reports none."""
    return WIDEST if limits is None else limits


def _text(moment: date | datetime) -> str:
    return moment.isoformat(sep=" ") if isinstance(moment, datetime) else moment.isoformat()


# -- SQLite ------------------------------------------------------------------------------------------------
#
# Each auditable column gets one classifying ``CASE`` (0: fine, else the index of its reason + 1), computed
# once per row in a subquery that ``LIMIT -1`` keeps from being flattened (SQLite would otherwise repeat the
# expression for every reference); the outer query sums each reason. The common value takes one cheap
# branch: ``datetime(v) IS v`` holds for canonical naive whole-second text (see ``_canonical``).


@dataclass(frozen=True, slots=True)
class _Classifier:
    column: ColumnSpec
    #: (reason, condition) in priority order; a row takes the first that holds
    branches: tuple[tuple[str, str], ...]
    #: a condition under which the row is fine and no branch needs evaluating (or None)
    fast_ok: str | None = None
    #: (reason, condition) checked on the fast path instead
    fast_branches: tuple[tuple[str, str], ...] = ()
    bounds_text: tuple[object, object] = (None, None)

    def reasons(self) -> list[str]:
        return list(dict.fromkeys([r for r, _ in self.branches] + [r for r, _ in self.fast_branches]))

    def expression(self) -> str:
        codes = {reason: index + 1 for index, reason in enumerate(self.reasons())}
        q = lite.quote_ident(self.column.name)

        def cases(branches: tuple[tuple[str, str], ...]) -> str:
            if not branches:
                return "0"
            whens = " ".join(f"WHEN {cond} THEN {codes[reason]}" for reason, cond in branches)
            return f"CASE {whens} ELSE 0 END"

        fast = f"WHEN {self.fast_ok} THEN {cases(self.fast_branches)} " if self.fast_ok else ""
        return f"CASE WHEN {q} IS NULL THEN 0 {fast}ELSE {cases(self.branches)} END"


def _sqlite_decimal(q: str, precision: int, scale: int) -> str:
    """The condition "this stored value is not exactly a ``Decimal(p, s)``", per storage class."""
    whole = precision - scale
    limit = 10**whole
    integer_bad = f"({q} >= {limit} OR {q} <= -{limit})" if limit < 2**63 else "0"
    # at precision <= 15 the rounding at the scale has <= 15 digits, and two such decimals never share a
    # double: round() giving the value back proves it exact (the converters' fast path); beyond, SQLite's
    # round() keeps about 16 digits (round(123456789012.34, 10) is 123456789012.3399), so the converters'
    # own rule decides (``REAL_FITS_FUNCTION``)
    if precision > 15:
        real_bad = f"NOT {REAL_FITS_FUNCTION}({q}, {precision}, {scale})"
    else:
        real_bad = f"NOT (round({q}, {scale}) = {q} AND {q} < 1e{whole} AND {q} > -1e{whole})"
    unsigned = (
        f"(CASE WHEN substr(trim({q}), 1, 1) IN ('+', '-') THEN substr(trim({q}), 2) ELSE trim({q}) END)"
    )
    point = f"instr({unsigned}, '.')"
    integer_part = f"(CASE WHEN {point} > 0 THEN substr({unsigned}, 1, {point} - 1) ELSE {unsigned} END)"
    fraction = f"(CASE WHEN {point} > 0 THEN substr({unsigned}, {point} + 1) ELSE '' END)"
    # SQLite's text functions stop at a NUL: the byte length must be the character length (digits only)
    text_ok = (
        f"(length({q}) = length(CAST({q} AS BLOB)) "
        f"AND {unsigned} GLOB '*[0-9]*' AND {unsigned} NOT GLOB '*[^0-9.]*' AND {unsigned} NOT GLOB '*.*.*' "
        f"AND length(ltrim({integer_part}, '0')) <= {whole} AND length(rtrim({fraction}, '0')) <= {scale})"
    )
    return (
        f"CASE typeof({q}) WHEN 'integer' THEN {integer_bad} WHEN 'real' THEN {real_bad} "
        f"WHEN 'text' THEN NOT {text_ok} ELSE 1 END"
    )


def _not_iso(q: str, kind: str) -> str:
    """``q`` is not text starting with a real calendar date followed by a time that parses (or nothing), for
    SQLite and for the converters' parser of ``kind`` (``PARSES_FUNCTION``, asked only of the text SQLite
    accepts). SQLite's functions read text only up to a NUL, Python's parser reads past it (and takes any
    character between date and time), so only ASCII text without a NUL (its byte length is its length)
    reaches them: ``2026-11-30\\x002024`` is midnight to SQLite and 20:24 to Python."""
    t = f"trim({q})"
    sqlite_reads = (
        f"typeof({q}) = 'text' AND length({q}) = length(CAST({q} AS BLOB)) AND {t} GLOB '{lite.ISO_DATE_GLOB}' "
        f"AND date(substr({t}, 1, 10), '+0 days') IS substr({t}, 1, 10) "
        f"AND (length({t}) = 10 OR datetime({t}) IS NOT NULL)"
    )
    converter_reads = f"{PARSES_FUNCTION}(CAST({q} AS BLOB), '{kind}')"
    return f"(CASE WHEN NOT ({sqlite_reads}) THEN 1 WHEN {converter_reads} THEN 0 ELSE 1 END)"


def _sub_second(t: str) -> str:
    """ISO text ``t`` has a non-zero digit after the seconds (SQLite's own parsers keep three at most)."""
    return f"substr({t}, 20, 1) IN ('.', ',') AND ltrim(substr({t}, 21), '0') GLOB '[1-9]*'"


def _time_of_day(t: str) -> str:
    """ISO text ``t`` (already not ``NOT_DATE``) is more than a day: a local time other than midnight, or
    an offset other than zero (its moment is not the day's UTC midnight; ``julianday`` applies it). Digits
    past the seconds are checked as text."""
    midnight = f"julianday(substr({t}, 1, 10))"
    local = f"julianday(substr({t}, 1, 19))"
    return (
        f"length({t}) > 10 AND (julianday({t}) IS NOT {midnight} OR {local} IS NOT {midnight} "
        f"OR {_sub_second(t)})"
    )


def _canonical(function: str, q: str) -> str:
    """``q`` is the canonical text of a real date (or whole-second naive datetime). SQLite's ``date()``
    keeps a day 29-31 that the month lacks (``2026-02-30``), and ``datetime()`` an hour 24
    (``2026-11-30 24:59:59``, which Python's parser refuses); only a modifier normalizes them, at twice the
    cost, so it is applied to those texts alone."""
    plain = f"substr({q}, 9, 2) <= '28'"
    if function == "datetime":
        plain += f" AND substr({q}, 12, 2) < '24'"
    return f"({function}({q}) IS {q} AND ({plain} OR {function}({q}, '+0 days') IS {q}))"


#: The SQL names of the Python functions the audit's connections register (:func:`register_functions`).
UTF8_FUNCTION = "dpone_is_utf8"
PARSES_FUNCTION = "dpone_parses_as"
REAL_FITS_FUNCTION = "dpone_real_fits"


def _is_utf8(value: bytes | None) -> int:
    try:
        (value or b"").decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return 1


def _parses_as(value: bytes | None, kind: str) -> int:
    try:
        text = (value or b"").decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return int(column_values.iso_parses(text, date_only=kind == "date"))


def register_functions(connection: sqlite3.Connection) -> None:
    """Make the audit's Python functions callable on ``connection``. Both take the value as a blob (the
    text's bytes), so Python never decodes it on the way in: ``UTF8_FUNCTION(b)`` is 1 when ``b`` is valid
    UTF-8 as Python's strict decoder reads it; ``PARSES_FUNCTION(b, 'date' | 'datetime')`` is 1 when the
    converters' own parser reads it as that kind; ``REAL_FITS_FUNCTION(r, p, s)`` is 1 when the converters
    take the REAL ``r`` into ``Decimal(p, s)``."""
    connection.create_function(UTF8_FUNCTION, 1, _is_utf8, deterministic=True)
    connection.create_function(PARSES_FUNCTION, 2, _parses_as, deterministic=True)
    connection.create_function(REAL_FITS_FUNCTION, 3, column_values.float_fits, deterministic=True)


def _not_utf8(q: str) -> str:
    """``q`` is text that is not valid UTF-8. Text of printable ASCII alone (every byte 0x20..0x7E is
    UTF-8) skips the Python function: GLOB finds any other character before the first NUL, and a NUL makes
    ``length`` (characters before the first NUL) differ from the byte length."""
    suspect = f"({q} GLOB '*[^ -~]*' OR length({q}) <> length(CAST({q} AS BLOB)))"
    return f"typeof({q}) = 'text' AND {suspect} AND NOT {UTF8_FUNCTION}(CAST({q} AS BLOB))"


def _classifier(column: ColumnSpec, calendar: set[str], lim: ValueLimits) -> _Classifier | None:
    q = lite.quote_ident(column.name)
    t = f"trim({q})"
    kind = column.clickhouse_type
    if kind == "String":
        return _Classifier(column, ((NOT_UTF8, _not_utf8(q)),))
    if kind.startswith(("Int", "UInt")) and kind != "UInt8":
        return _Classifier(column, ((NOT_INTEGER, f"typeof({q}) <> 'integer'"),))
    if kind == "UInt8":
        return _Classifier(
            column, ((NOT_FLAG, f"NOT (typeof({q}) IN ('integer', 'real') AND {q} IN (0, 1))"),)
        )
    if kind in ("Float64", "Float32"):
        bad = f"typeof({q}) IN ('text', 'blob') OR (typeof({q}) = 'integer' AND ({q} > {2**53} OR {q} < -{2**53}))"
        return _Classifier(column, ((NOT_FLOAT, bad),))
    if kind.startswith("Decimal("):
        precision, scale = (int(p) for p in kind[len("Decimal(") : -1].split(","))
        return _Classifier(column, ((DECIMAL_DIGITS, _sqlite_decimal(q, precision, scale)),))
    if kind == "Date":
        low, high = _text(lim["date_min"]), _text(lim["date_max"])
        return _Classifier(
            column,
            (
                (NOT_DATE, _not_iso(q, "date")),
                (TIME_IN_DATE, _time_of_day(t)),
                (OUT_OF_RANGE, f"substr({t}, 1, 10) NOT BETWEEN '{low}' AND '{high}'"),
            ),
            fast_ok=_canonical("date", q),
            fast_branches=((OUT_OF_RANGE, f"{q} NOT BETWEEN '{low}' AND '{high}'"),),
            bounds_text=(low, high),
        )
    if kind == "DateTime":
        low, high = _text(lim["datetime_min"]), _text(lim["datetime_max"])
        branches = [
            (NOT_DATETIME, _not_iso(q, "datetime")),
            (OUT_OF_RANGE, f"datetime({t}) NOT BETWEEN '{low}' AND '{high}'"),
            (SUB_SECOND, _sub_second(t)),
        ]
        if column.name in calendar:
            # the day predicate compares the text's local date; the value is stored at its UTC instant
            branches.append((UTC_OFFSET, f"datetime({t}) IS NOT datetime(substr({t}, 1, 19))"))
        return _Classifier(
            column,
            tuple(branches),
            fast_ok=_canonical("datetime", q),
            fast_branches=((OUT_OF_RANGE, f"{q} NOT BETWEEN '{low}' AND '{high}'"),),
            bounds_text=(low, high),
        )
    return None


@dataclass(frozen=True, slots=True)
class StorageFact:
    """A count the audit takes beside its checks, never a refusal: the rows of ``column`` whose stored
    value is of a storage class ``condition`` names. The Arrow read (``sqlite_arrow``) needs these to know
    that a column holds one kind of value; a count above zero only keeps the run on the row read."""

    column: str
    condition: str


def storage_facts(schema: TableSchema) -> tuple[StorageFact, ...]:
    """What the Arrow read must know beyond the checks: text among a ``Decimal`` column's numbers (the
    read takes them as doubles), and anything but text in a text column (a blob would arrive as text)."""
    facts = []
    for column in schema.columns:
        q = lite.quote_ident(column.name)
        if column.clickhouse_type.startswith("Decimal("):
            facts.append(StorageFact(column.name, f"typeof({q}) IN ('text', 'blob')"))
        elif column.clickhouse_type == "String":
            facts.append(StorageFact(column.name, f"typeof({q}) IN ('integer', 'real', 'blob')"))
    return tuple(facts)


@dataclass(frozen=True, slots=True)
class SqlitePlan:
    """The checks of one SQLite audit and the inner classifying expressions they sum; ``facts`` are
    counted after the checks, in the same pass (their columns follow the checks' in every row)."""

    checks: tuple[Check, ...]
    inner: tuple[str, ...]
    facts: tuple[StorageFact, ...] = ()

    def statement(self, source: str, bounds: Sequence[PartitionBounds]) -> tuple[str, tuple[object, ...]]:
        """One aggregate over the union of the partitions' predicates (each exactly the one its read uses)."""
        union = lite.any_of(bounds)
        where, params = (f"\n  WHERE {union[0]}", union[1]) if union is not None else ("", ())
        inner = [*self.inner, *(f"({f.condition}) AS dpone_f{i}" for i, f in enumerate(self.facts))]
        outer = [
            *(c.expression for c in self.checks),
            *(f"COALESCE(SUM(dpone_f{i}), 0)" for i in range(len(self.facts))),
        ]
        text = (
            f"SELECT {', '.join(outer)}\nFROM (SELECT {', '.join(inner)}\n  FROM {source}{where}\n  LIMIT -1)"
        )
        return text, params

    @staticmethod
    def add_counts(rows: Sequence[Sequence[object]]) -> tuple[int, ...]:
        """Every check of a SQLite audit is a count: the statements of ``merged_ranges`` add up to exactly
        the counts of one statement over the union."""
        return tuple(sum(_count(value) for value in column) for column in zip(*rows, strict=True))


#: characters of a date/datetime bound whose text order is the same under SQLite's BINARY, NOCASE and
#: RTRIM collations and Python's ``str`` order (ISO digits and separators; ``T`` folds the same in both)
_ISO_CHARACTERS = frozenset("0123456789-:. T")


def _in_order(low: str | None, high: str | None, value_type: str) -> bool:
    """``low <= high`` in every order SQLite may compare the column with (``None``: the open side)."""
    if low is None or high is None:
        return True
    if value_type == "integer":
        try:
            numeric = int(low) <= int(high)
        except ValueError:
            return False
        # a TEXT column compares an integer bound as text: the ranges must be ordered that way too
        return numeric and str(int(low)) <= str(int(high))
    if value_type in ("date", "datetime"):
        plain = all(set(v) <= _ISO_CHARACTERS and not v.endswith(" ") for v in (low, high))
        return plain and low <= high
    return False


def merged_ranges(bounds: Sequence[PartitionBounds]) -> list[PartitionBounds]:
    """The same rows as the union of ``bounds``, as few bounds as possible, for one audit statement each.

    Why not one ``OR`` of the ranges: SQLite answers it with its multi-index OR plan, which keeps the rowid
    of every row it visited (a RowSet: 117 MB at 5M rows) until the statement ends; one range is an index
    scan in constant memory. ``[a, b)`` and ``[b, c)`` on one column and value type become ``[a, c)`` when
    ``a <= b <= c`` in every order the engine may compare with (otherwise, as for lists and ``string``
    ranges, each bound stays its own); ``[a, b) | [b, c)`` is ``[a, c)`` in any total order, so the
    merged predicate selects exactly the rows of the reads."""
    return merge_adjacent(bounds, _in_order)


def audit_runs(bounds: Sequence[PartitionBounds], workers: int) -> list[PartitionBounds]:
    """The statements of one audit for ``workers`` connections: the partitions in ``workers`` consecutive
    groups (as even by count as they divide), each group's ranges merged (``merged_ranges``).

    The groups cover every partition once, so the statements' counts add up to those of one statement over
    the union, as the runs of ``merged_ranges`` already do; each statement is still an index range scan."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    size = -(-len(bounds) // workers) if bounds else 1
    return [
        run for start in range(0, len(bounds), size) for run in merged_ranges(bounds[start : start + size])
    ]


def sqlite_plan(
    schema: TableSchema,
    bounds: Sequence[PartitionBounds],
    limits: ValueLimits | None,
    *,
    exempt: frozenset[str] = frozenset(),
    with_facts: bool = False,
) -> SqlitePlan | None:
    """The audit of a read of ``schema``; ``None`` when no column can hold a refused value. ``exempt``:
    columns SQLite itself keeps exact (the rowid alias holds only integers). ``with_facts``: also count
    the :func:`storage_facts` (for the Arrow read)."""
    lim = held_limits(limits)
    calendar = _calendar_partition_columns(bounds)
    audited = [col for col in schema.columns if col.name not in exempt]
    classifiers = [c for c in (_classifier(col, calendar, lim) for col in audited) if c is not None]
    if not classifiers or not bounds:
        return None
    checks: list[Check] = []
    inner: list[str] = []
    for index, classifier in enumerate(classifiers):
        inner.append(f"{classifier.expression()} AS dpone_c{index}")
        for code, reason in enumerate(classifier.reasons(), start=1):
            low, high = classifier.bounds_text if reason == OUT_OF_RANGE else (None, None)
            outer = f"COALESCE(SUM(dpone_c{index} = {code}), 0)"
            checks.append(Check(classifier.column, reason, outer, _count, low, high))
    return SqlitePlan(tuple(checks), tuple(inner), storage_facts(schema) if with_facts else ())


# -- SQL Server --------------------------------------------------------------------------------------------


def _as_date(value: object) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def _as_datetime(value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    return datetime.fromisoformat(str(value)).replace(tzinfo=None)


def _below(low: object, parse: Callable[[object], object]) -> Callable[[object], int]:
    return lambda value: int(value is not None and parse(value) < low)  # type: ignore[operator]


def _above(high: object, parse: Callable[[object], object]) -> Callable[[object], int]:
    return lambda value: int(value is not None and parse(value) > high)  # type: ignore[operator]


def mssql_offset_partition(schema: TableSchema, bounds: Sequence[PartitionBounds]) -> ColumnSpec | None:
    """A ``datetimeoffset`` column partitioned by day or month: refused by its type, no query needed."""
    for name in _calendar_partition_columns(bounds):
        if name in schema.names and (schema.column(name).source_type or "").lower() == "datetimeoffset":
            return schema.column(name)
    return None


def mssql_checks(schema: TableSchema, limits: ValueLimits | None) -> list[Check]:
    """MIN/MAX of calendar columns against the target's range, sub-second digits, a ``time`` column's
    seventh digit, coarse decimal digits (scale and whole part)."""
    lim = held_limits(limits)
    checks: list[Check] = []
    for column in schema.columns:
        q = tsql.quote_ident(column.name)
        source_type = (column.source_type or "").lower()
        kind = column.clickhouse_type
        if kind in ("Date", "DateTime"):
            value = (
                f"CAST(SWITCHOFFSET({q}, '+00:00') AS DATETIME2)" if source_type == "datetimeoffset" else q
            )
            if kind == "Date":
                low, high, parse = lim["date_min"], lim["date_max"], _as_date
            else:
                low, high, parse = lim["datetime_min"], lim["datetime_max"], _as_datetime
            texts = (_text(low), _text(high))
            checks.append(Check(column, OUT_OF_RANGE, f"MIN({value})", _below(low, parse), *texts))
            checks.append(Check(column, OUT_OF_RANGE, f"MAX({value})", _above(high, parse), *texts))
            if kind == "DateTime" and source_type != "smalldatetime":
                # rounding to whole seconds changes exactly the values with a fraction (any precision; the
                # TDS emulator knows no DATEPART(NANOSECOND))
                whole = "DATETIMEOFFSET(0)" if source_type == "datetimeoffset" else "DATETIME2(0)"
                checks.append(Check(column, SUB_SECOND, _sum(f"CAST({q} AS {whole}) <> {q}"), _count))
        elif source_type == "time":
            # the describe keeps no scale for time (time(0) .. time(7)): below 7 the cast changes nothing
            checks.append(Check(column, SUB_MICROSECOND, _sum(f"CAST({q} AS TIME(6)) <> {q}"), _count))
        elif kind.startswith("Decimal(") and source_type == "tds:decimal":
            precision, scale = (int(part) for part in kind[len("Decimal(") : -1].split(","))
            # digits past the scale (truncated, ROUND's third argument: rounding 0.99..9 up overflows a
            # decimal(38,38)), and whole digits past precision - scale (a decimal(38,0) value of 29+ digits
            # passed: refused inside the target call, the route blocked)
            whole = 10 ** (precision - scale)  # an exact numeric literal: no float rounding at the edge
            changed = f"ROUND({q}, {scale}, 1) <> {q} OR ABS({q}) >= {whole}"
            checks.append(Check(column, DECIMAL_DIGITS, _sum(changed), _count))
    return checks


def mssql_first_value(source: str, column: ColumnSpec, bounds: Sequence[PartitionBounds]) -> tsql.Statement:
    """The column's first non-NULL value in the partitions: what Python type the driver hands over for a
    column a coarse description could not name (:func:`is_clock_value`)."""
    q = tsql.quote_ident(column.name)
    statement = tsql.sql(f"SELECT TOP 1 {q}\nFROM {source}\nWHERE {q} IS NOT NULL")
    union = tsql.any_of(bounds)
    return statement if union is None else statement + " AND (" + union + ")"


def mssql_beyond_float(column: ColumnSpec) -> Check:
    """Integers a ``Float64`` cannot hold exactly (past 2**53): the converters refuse them (``floats``)."""
    q = tsql.quote_ident(column.name)
    limit = 2**53
    return Check(column, BEYOND_FLOAT, _sum(f"{q} > {limit} OR {q} < -{limit}"), _count)


def is_clock_value(value: object) -> bool:
    """A ``time`` or datetime (``datetime2``, ``datetimeoffset``): precision past microseconds unknown."""
    return isinstance(value, (time, datetime))


def mssql_statement(
    source: str, checks: Sequence[Check], bounds: Sequence[PartitionBounds]
) -> tsql.Statement:
    statement = tsql.sql(f"SELECT {', '.join(c.expression for c in checks)}\nFROM {source}")
    union = tsql.any_of(bounds)
    return statement if union is None else statement + "\nWHERE " + union


# -- the verdict -------------------------------------------------------------------------------------------


def _describe(check: Check) -> str:
    kind = "Date" if check.column.clickhouse_type == "Date" else "DateTime"
    return _TEXTS[check.reason].format(type=kind, low=check.low, high=check.high)


def refusal(
    column: ColumnSpec, reason: str, rows: int | None, table: str, *, low: object = None, high: object = None
) -> DponeError:
    """``manifest_invalid`` naming the column and the reason; ``rows`` (a count) when it was measured."""
    check = Check(column, reason, "", _count, low, high)
    counted = "" if rows is None else f" ({rows} row{'s' if rows != 1 else ''})"
    hints = ["nothing was written and no checkpoint recorded: the route is not blocked"]
    if reason in _HINTS:
        hints.append(_HINTS[reason])
    else:
        hints.append("correct the source rows, or convert or filter them in source.query")
    return DponeError(
        ErrorCode.MANIFEST_INVALID,
        f"column {column.name!r} ({column.clickhouse_type}) holds values that {_describe(check)}{counted}",
        details={
            "column": column.name,
            "clickhouse_type": column.clickhouse_type,
            "reason": reason,
            "table": table,
            **({} if rows is None else {"rows": rows}),
        },
        hint_lines=tuple(hints),
    )


def require_clean(checks: Sequence[Check], row: Sequence[object], table: str) -> None:
    """Raise for the first check that refused rows, listing every other refusal too, so one run shows
    everything to fix (the statement's columns follow ``checks``)."""
    if len(row) != len(checks):
        raise DponeError(
            ErrorCode.SOURCE_READ_FAILED,
            f"the value audit of source table {table} returned an unexpected result",
            details={"table": table},
        )
    found: list[tuple[Check, int | None]] = []
    for check, value in zip(checks, row, strict=True):
        refused = check.refused(value)
        if refused and all((c.column.name, c.reason) != (check.column.name, check.reason) for c, _ in found):
            found.append((check, refused if check.expression.startswith("COALESCE(SUM") else None))
    if not found:
        return
    (first, counted), others = found[0], found[1:]
    error = refusal(first.column, first.reason, counted, table, low=first.low, high=first.high)
    if others:
        error.details["also"] = [{"column": c.column.name, "reason": c.reason} for c, _ in others]
        more = [_HINTS[c.reason] for c, _ in others if c.reason in _HINTS]
        error.hint_lines = tuple(
            dict.fromkeys(
                [
                    *(f"also: column {c.column.name!r} holds values that {_describe(c)}" for c, _ in others),
                    *error.hint_lines,
                    *more,
                ]
            )
        )
    raise error
