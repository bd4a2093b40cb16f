"""Identifier and literal quoting for generated ClickHouse SQL.

Values reach SQL only through these functions. Bounds come from the source, not the user, but they are
escaped all the same: a partition value containing a quote or a backslash must stay a value.
"""

from __future__ import annotations

from dataclasses import dataclass

from clickhouse_connect.driver.binding import quote_identifier as _driver_quote

_ESCAPES = {"\\": "\\\\", "'": "\\'", "`": "\\`", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in text)


def quote_identifier(name: str) -> str:
    """A backtick-quoted identifier (works on 18.16 and on current engines)."""
    return f"`{_escape(name)}`"


def driver_misquotes(name: str) -> bool:
    """Whether clickhouse-connect's insert would address column ``name`` as another column.

    ``Client.insert(column_names=...)`` writes each name twice: quoted by the client into the ``INSERT``
    column list, and as it is into the Native block, whose names the server matches against that list. The
    client takes a name that already looks quoted (it starts and ends with a backtick or a double quote, with
    valid escapes inside: `` `x` ``, ``"x"``, ````` `` `````) as quoted and sends it unchanged, so the list
    names ``x`` (no such column) or is a syntax error; passing a pre-quoted name instead leaves the block's
    names unmatched and the server fills defaults (0 for every value) without an error, on 18.16 and chDB
    alike. Such names are refused before the target is touched. Every other name (inner backticks,
    quotes, backslashes, spaces, Unicode) is quoted correctly by both and round-trips.
    """
    return _driver_quote(name) == name


def quote_string(value: str) -> str:
    """A single-quoted string literal with backslash escapes."""
    return f"'{_escape(value)}'"


@dataclass(frozen=True, slots=True)
class TableName:
    """``database.table`` split once, so every statement quotes both parts the same way."""

    database: str
    table: str

    @classmethod
    def parse(cls, qualified: str, default_database: str | None = None) -> TableName:
        """``db.table`` (the manifest's form) or a bare ``table`` in the connection's database."""
        parts = qualified.split(".")
        if len(parts) == 2 and all(parts):
            return cls(parts[0], parts[1])
        if len(parts) == 1 and parts[0]:
            return cls(default_database or "default", parts[0])
        raise ValueError("table names are 'database.table' or 'table'")

    def sql(self) -> str:
        return f"{quote_identifier(self.database)}.{quote_identifier(self.table)}"

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"
