"""Which SQL the ClickHouse hook lets through: one read statement, nothing else.

This is the hook's message, not its enforcement: every request it sends carries ``readonly=1``, so the
server (or embedded engine) refuses a change this check missed. The check exists so that a DDL or DML
statement is refused by name (``target_mutation_unguarded``) before any connection is opened.

A statement is a read when, past comments, whitespace and opening parentheses, its first keyword is one
of :data:`READ_KEYWORDS`; it holds no second statement after a ``;``; and it writes no file
(``INTO OUTFILE``). Quoted strings and identifiers are skipped, so a ``;`` or a keyword inside them
counts for nothing.
"""

from __future__ import annotations

import itertools
import re

#: First keywords of the statements the hook serves (``WITH`` opens a SELECT in ClickHouse).
READ_KEYWORDS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS"})

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _words(sql: str) -> tuple[list[str], bool]:
    """Bare words outside quotes and comments (upper case), and whether a statement follows a ``;``."""
    words: list[str] = []
    i, n = 0, len(sql)
    after_semicolon = False
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i) or ch == "#":
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in "'\"`":
            i = _skip_quoted(sql, i, ch)
            if after_semicolon:
                return words, True
        elif ch == ";":
            after_semicolon = True
            i += 1
        elif ch.isspace():
            i += 1
        else:
            if after_semicolon:
                return words, True
            match = _WORD.match(sql, i)
            if match:
                words.append(match.group(0).upper())
                i = match.end()
            else:
                i += 1
    return words, False


def _skip_quoted(sql: str, start: int, quote: str) -> int:
    i = start + 1
    while i < len(sql):
        if sql[i] == "\\":
            i += 2
        elif sql[i] == quote:
            if sql.startswith(quote * 2, i):  # a doubled quote stands for itself
                i += 2
            else:
                return i + 1
        else:
            i += 1
    return i  # an unterminated quote: the server will refuse the statement


def refusal_reason(sql: str) -> str | None:
    """``None`` for one read statement, else why it is refused (a fixed phrase, never the SQL)."""
    words, second_statement = _words(sql)
    if not words:
        return "the statement is empty"
    if second_statement:
        return "it holds more than one statement"
    if words[0] not in READ_KEYWORDS:
        return "it is not a read (SELECT, WITH, SHOW, DESCRIBE, EXISTS)"
    if any(a == "INTO" and b == "OUTFILE" for a, b in itertools.pairwise(words)):
        return "it writes a file (INTO OUTFILE)"
    return None
