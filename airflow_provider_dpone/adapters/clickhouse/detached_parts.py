"""The parts detached from a target table, and the values each one's partition holds (ADR 0093).

``system.detached_parts`` lists them (current servers and chDB: ``partition_id``, ``name``, ``reason``, and
more columns this module does not read, among them a path on the server, never passed on). ClickHouse 18.16
has no such table: there the listing is ``None`` and the runtime falls back on what 18.16 shows.

A partition ID tells the values it holds only for the keys read here: one column of a calendar or integer
type, or one of ``toDate``, ``toYYYYMMDD``, ``toYYYYMM``, ``toStartOfMonth``, ``toMonday``, ``toYear`` of one
calendar column. ClickHouse writes such an ID as the key's value (a ``Date`` as ``YYYYMMDD``, an integer in
decimal). Of a ``DateTime`` column the functions are taken in a time zone (the column's or the server's) the
route's bounds do not name, so the range is widened by a day on each side: a range that is too wide stops
a run it need not have stopped, never the other way round. Any other key (none, text, a tuple, another
function) gives no range: such a part may hold rows of any partition.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, timedelta

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.listed_reads import listed
from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string
from airflow_provider_dpone.contracts.detached_part import DetachedPart
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

_IDENT = r"(?:`(?P<{0}>[^`\\]+)`|(?P<{1}>[A-Za-z_][A-Za-z0-9_]*))"
#: ``col`` or ``fn(col)``, as ``system.tables.partition_key`` writes a key (back-quoted where it must be).
_KEY = re.compile(
    r"^(?:(?P<fn>toDate|toYYYYMMDD|toYYYYMM|toStartOfMonth|toMonday|toYear)\(\s*"
    + _IDENT.format("qf", "pf")
    + r"\s*\)|"
    + _IDENT.format("qc", "pc")
    + r")$"
)
_WRAPPER = re.compile(r"^(?:Nullable|LowCardinality)\((.*)\)$")
_INTEGER_TYPE = re.compile(r"^U?Int(?:8|16|32|64|128|256)$")
_DATETIME_TYPE = re.compile(r"^DateTime(?:64)?(?:\(.*\))?$")


def detached_parts(
    client: Client, name: TableName, *, listable: bool | None = None
) -> list[DetachedPart] | None:
    """``name``'s detached parts (``[]``: none, or no such table), each with the range of its partition
    where the key tells it; ``None`` when the engine cannot list them and the table exists. ``listable``:
    whether the engine has ``system.detached_parts`` (None: ask it). Read-only: one statement when the
    table has none (chDB; two on a server, three on 18.16), two more when it has some (its key, its type)."""
    if listable is None:
        listable = _exists(client, "system.detached_parts")
    if not listable:
        return None if _exists(client, name.sql()) else []  # dropping a table drops its detached folder
    # one row whatever the table holds (count() beside the list): an answer cut to nothing raises instead
    # of reading as "none detached" (ADR 0094, addendum); a tuple keeps a NULL partition_id in the list
    found = listed(
        client,
        "groupArray(tuple(partition_id, name, reason)) FROM system.detached_parts WHERE "
        f"database = {quote_string(name.database)} AND table = {quote_string(name.table)}",
        "system.detached_parts",
    )
    rows = sorted(((p, str(n), r) for p, n, r in found), key=lambda row: row[1])
    if not rows:
        return []
    mapping = _mapping(client, name)
    return [
        DetachedPart(
            name=str(part),
            partition_id=None if partition is None else str(partition),
            reason=str(reason or ""),
            covers=None if mapping is None or partition is None else mapping(str(partition)),
        )
        for partition, part, reason in rows
    ]


def _exists(client: Client, table: str) -> bool:
    return bool(int(client.query(f"EXISTS TABLE {table}").result_rows[0][0]))


def _mapping(client: Client, name: TableName) -> Callable[[str], PartitionBounds | None] | None:
    """How a partition ID of ``name`` becomes the range of its key column's values (None: it does not)."""
    keys = client.query(
        "SELECT partition_key FROM system.tables WHERE "
        f"database = {quote_string(name.database)} AND name = {quote_string(name.table)}"
    ).result_rows
    parsed = _KEY.match(str(keys[0][0] or "").strip()) if keys else None
    if parsed is None:
        return None
    column = parsed.group("qf") or parsed.group("pf") or parsed.group("qc") or parsed.group("pc")
    types = client.query(
        "SELECT type FROM system.columns WHERE "
        f"database = {quote_string(name.database)} AND table = {quote_string(name.table)} "
        f"AND name = {quote_string(column)}"
    ).result_rows
    if not types:
        return None
    type_name = str(types[0][0])
    function = parsed.group("fn")
    return lambda partition_id: covered_values(column, type_name, function, partition_id)


def covered_values(
    column: str, type_name: str, function: str | None, partition_id: str
) -> PartitionBounds | None:
    """The values of ``column`` (of ``type_name``) that the partition ``partition_id`` holds when the key
    is ``function(column)`` (``None``: the column itself), as a range; None where the ID does not tell them.

    Only a key whose value is a plain ``Date`` is written ``YYYYMMDD``: of a ``Date32`` or a ``Nullable``
    one ClickHouse writes the day number, and of a ``DateTime`` the second; an integer key is written in
    decimal (``toYYYYMM``, ``toYYYYMMDD`` and ``toYear`` give integers whatever their column)."""
    base = _unwrapped(type_name)
    wrapped = base != type_name.strip()
    label = f"detached partition {partition_id}"
    if function is None and not wrapped and _INTEGER_TYPE.match(base):
        if not re.fullmatch(r"-?[0-9]{1,39}", partition_id):
            return None
        value = int(partition_id)
        return PartitionBounds(
            kind=BoundsKind.RANGE,
            column=column,
            lower=str(value),
            upper=str(value + 1),
            value_type="integer",
            label=label,
        )
    timed = bool(_DATETIME_TYPE.match(base))
    if not (base in ("Date", "Date32") or timed):
        return None
    if function is None and (base != "Date" or wrapped):
        return None  # written as a day or second number, not read here
    if function in ("toDate", "toStartOfMonth", "toMonday") and wrapped:
        return None  # a Nullable Date value: a day number
    span = _span(function, partition_id)
    if span is None:
        return None
    lower, upper = span
    try:
        if timed:  # the function ran in a time zone the bounds do not name: a day more on each side
            lower, upper = lower - timedelta(days=1), upper + timedelta(days=1)
    except OverflowError:
        return None
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column=column,
        lower=lower.isoformat(),
        upper=upper.isoformat(),
        value_type="date",
        label=label,
    )


def _span(function: str | None, partition_id: str) -> tuple[date, date] | None:
    """``[first day, day after the last)`` of the partition ``partition_id`` of a key ``function(day)``."""
    try:
        if function in (None, "toDate", "toYYYYMMDD", "toStartOfMonth", "toMonday"):
            if not re.fullmatch(r"[0-9]{8}", partition_id):
                return None
            first = date(int(partition_id[:4]), int(partition_id[4:6]), int(partition_id[6:]))
            if function == "toStartOfMonth":
                return (first, _next_month(first)) if first.day == 1 else None
            if function == "toMonday":
                return (first, first + timedelta(days=7)) if first.weekday() == 0 else None
            return first, first + timedelta(days=1)
        if function == "toYYYYMM":
            if not re.fullmatch(r"[0-9]{6}", partition_id):
                return None
            first = date(int(partition_id[:4]), int(partition_id[4:]), 1)
            return first, _next_month(first)
        if function == "toYear":
            if not re.fullmatch(r"[0-9]{4}", partition_id):
                return None
            return date(int(partition_id), 1, 1), date(int(partition_id) + 1, 1, 1)
    except (ValueError, OverflowError):
        return None
    return None


def _next_month(first: date) -> date:
    return first + timedelta(days=calendar.monthrange(first.year, first.month)[1])


def _unwrapped(type_name: str) -> str:
    """The type inside ``Nullable(...)`` / ``LowCardinality(...)``."""
    text = type_name.strip()
    while (inner := _WRAPPER.match(text)) is not None:
        text = inner.group(1).strip()
    return text
