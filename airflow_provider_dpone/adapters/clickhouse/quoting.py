"""Identifier and literal quoting for generated ClickHouse SQL.

Values reach SQL only through these functions. Bounds come from the source, not the user, but they are
escaped all the same: a partition value containing a quote or a backslash must stay a value.
"""

from __future__ import annotations

from dataclasses import dataclass

_ESCAPES = {"\\": "\\\\", "'": "\\'", "`": "\\`", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in text)


def quote_identifier(name: str) -> str:
    """A backtick-quoted identifier (works on 18.16 and on current engines)."""
    return f"`{_escape(name)}`"


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
