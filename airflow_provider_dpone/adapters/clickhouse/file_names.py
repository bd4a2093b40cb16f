"""Column names a server without long-name hashing cannot store.

A MergeTree part keeps each column in files named after it: every byte other than ``[A-Za-z0-9_]`` escaped
as ``%XX``, then a suffix (``.bin``, ``.mrk``, ``.null.bin``, ``.null.mrk``...). A server before
``replace_long_file_name_to_hash`` (the 18.16 server) cannot open a file whose name passes the file
system's 255 bytes: its ``CREATE TABLE`` writes metadata only and succeeds, and every insert fails, after
arming (seen: a 49-letter Cyrillic column name, each letter two bytes escaped to six characters, blocked
its route, and resolving it let the next run block it again). Such a name is refused before arming.
"""

from __future__ import annotations

from collections.abc import Iterable

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: a file name's limit on the file systems servers run on (ext4, xfs: NAME_MAX)
MAX_FILE_NAME_BYTES = 255
#: the longest suffix a column's files take (``.null.mrk2``: a Nullable column's marks)
LONGEST_SUFFIX = len(".null.mrk2")


def escaped_length(name: str) -> int:
    """The length of ``name`` as the server escapes it for a file name."""
    return sum(
        1 if char.isascii() and (char.isalnum() or char == "_") else 3 * len(char.encode()) for char in name
    )


def require_storable_column_names(client: Client, table: str, names: Iterable[str]) -> None:
    """Before arming: refuse a column whose files the server could not name. Asks the server only when a
    name is that long; a server that hashes long names (``replace_long_file_name_to_hash``) stores any."""
    too_long = [name for name in names if escaped_length(name) + LONGEST_SUFFIX > MAX_FILE_NAME_BYTES]
    if not too_long or _hashes_long_names(client):
        return
    raise DponeError(
        ErrorCode.TARGET_INCOMPATIBLE,
        f"target table {table} cannot store column {too_long[0]!r} on this server: its file names would pass "
        f"{MAX_FILE_NAME_BYTES} bytes (each byte other than a letter, digit or _ takes three), and the server "
        "does not shorten them; nothing was written",
        details={
            "table": table,
            "column": too_long[0],
            "columns": too_long,
            "problem": "column_file_name_too_long",
        },
        hint_lines=("give the column a shorter name in source.query (SELECT ... AS short_name)",),
    )


def _hashes_long_names(client: Client) -> bool:
    rows = client.query(
        "SELECT value FROM system.merge_tree_settings WHERE name = 'replace_long_file_name_to_hash'"
    ).result_rows
    return bool(rows) and str(rows[0][0]).lower() in ("1", "true")
