"""Column names a server without long-name hashing cannot store.

A MergeTree part keeps each column in files named after it: every byte other than ``[A-Za-z0-9_]`` escaped
as ``%XX``, then a suffix (``.bin``; marks ``.mrk``, or ``.mrk2`` with adaptive granularity; a Nullable
column's ``.null.bin`` and ``.null.mrk``); a partition-key column also has ``minmax_<name>.idx``. A server
before ``replace_long_file_name_to_hash`` (the 18.16 server) cannot open a file whose name passes the file
system's 255 bytes: its ``CREATE TABLE`` writes metadata only and succeeds, and every insert fails, after
arming (seen: a 49-letter Cyrillic column name blocked its route, and resolving it let the next run block it
again). Such a column, the route's or one of a hand-made target's own, is refused before arming.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.listed_reads import listed
from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: a file name's limit on the file systems servers run on (ext4, xfs: NAME_MAX)
MAX_FILE_NAME_BYTES = 255
#: what a partition-key column's min/max index file adds: ``minmax_`` + ``.idx``
_MINMAX = len("minmax_") + len(".idx")


@dataclass(frozen=True, slots=True)
class StoredColumn:
    """A column the table keeps files of: its name, its type as the server prints it, whether it is in the
    partition key (a min/max index file of its own)."""

    name: str
    type_name: str
    in_partition_key: bool = False


def escaped_length(name: str) -> int:
    """The length of ``name`` as the server escapes it for a file name."""
    return sum(
        1 if char.isascii() and (char.isalnum() or char == "_") else 3 * len(char.encode()) for char in name
    )


def _substream(type_name: str) -> int:
    """The longest part a column's type adds between its name and the file's suffix: ``.null`` (a null
    map), ``.dict`` or ``.dict.null`` (a LowCardinality dictionary), ``.sizeN`` (array sizes, one per level), ``%2E<n>`` (the
    n-th element of a Tuple, plus what its type adds), or, for a Map, as much as 32 characters."""
    parts = [0]
    if "Nullable(" in type_name:
        parts.append(len(".null"))
    if "LowCardinality(" in type_name:
        # a LowCardinality(Nullable(...)) dictionary keeps its own null map: <name>.dict.null.mrk
        parts.append(len(".dict.null" if "LowCardinality(Nullable(" in type_name else ".dict"))
    depth = type_name.count("Array(")
    if depth:
        parts.append(len(f".size{depth - 1}"))
    elements = _tuple_elements(type_name)
    if elements:
        parts.append(len("%2E") + len(str(len(elements))) + max(_substream(e) for e in elements))
    if "Map(" in type_name:
        parts.append(32)
    return max(parts)


def _tuple_elements(type_name: str) -> list[str]:
    """The element types of the first ``Tuple(...)`` in ``type_name``, split at its top-level commas."""
    start = type_name.find("Tuple(")
    if start < 0:
        return []
    depth, begin, elements = 0, start + len("Tuple("), []
    for position in range(begin, len(type_name)):
        char = type_name[position]
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char in ",)" and depth == 0:
            elements.append(type_name[begin:position].strip())
            begin = position + 1
            if char == ")":
                break
    return elements


def longest_file_name(column: StoredColumn, *, adaptive_marks: bool) -> int:
    """The length of the longest file name the server gives the column."""
    marks = len(".mrk2" if adaptive_marks else ".mrk")
    longest = _substream(column.type_name) + marks
    return escaped_length(column.name) + max(longest, _MINMAX if column.in_partition_key else 0)


def require_storable_column_names(client: Client, table: TableName, columns: Sequence[StoredColumn]) -> None:
    """Before arming: refuse a column whose files the server could not name. Asks the server only when a
    name is that long; a server that hashes long names (``replace_long_file_name_to_hash``) stores any."""
    if all(longest_file_name(c, adaptive_marks=True) <= MAX_FILE_NAME_BYTES for c in columns):
        return
    found = listed(
        client,
        "groupArray(tuple(name, value)) FROM system.merge_tree_settings "
        "WHERE name IN ('replace_long_file_name_to_hash', 'index_granularity_bytes')",
    )
    settings = {str(name): str(value) for name, value in found}
    if settings.get("replace_long_file_name_to_hash", "0").lower() in ("1", "true"):
        return
    adaptive = settings.get("index_granularity_bytes", "0") not in ("", "0")
    too_long = [
        c.name for c in columns if longest_file_name(c, adaptive_marks=adaptive) > MAX_FILE_NAME_BYTES
    ]
    if not too_long:
        return
    raise DponeError(
        ErrorCode.TARGET_INCOMPATIBLE,
        f"target table {table} cannot store column {too_long[0]!r} on this server: its file names would pass "
        f"{MAX_FILE_NAME_BYTES} bytes (each byte other than a letter, digit or _ takes three), and the server "
        "does not shorten them; nothing was written",
        details={
            "table": str(table),
            "column": too_long[0],
            "columns": too_long,
            "problem": "column_file_name_too_long",
        },
        hint_lines=(
            "give the column a shorter name (SELECT ... AS short_name in source.query; a column of the target's "
            "own: rename it, ALTER TABLE ... RENAME COLUMN on newer servers, or re-create the table)",
        ),
    )


def stored_columns(
    client: Client, table: TableName, columns: Sequence[tuple[str, str]]
) -> list[StoredColumn]:
    """An existing table's ``(name, type)`` columns that keep files, with their partition-key membership
    (read from ``system.columns``, only when a name is long enough for it to matter: the server prints a
    key's names escaped, so its text cannot be searched)."""
    keyed: set[str] = set()
    if any(escaped_length(name) + _MINMAX > MAX_FILE_NAME_BYTES for name, _ in columns):
        found = listed(
            client,
            f"groupArray(name) FROM system.columns WHERE database = {quote_string(table.database)} "
            f"AND table = {quote_string(table.table)} AND is_in_partition_key",
        )
        keyed = {str(name) for name in found}
    return [StoredColumn(name, type_name, name in keyed) for name, type_name in columns]
