"""The text of a ``source.query`` as one statement: where its terminators and comments are.

Every read wraps the query as a derived table (``(<query>) AS q``), so a statement terminator inside the
parentheses is a syntax error. A trailing ``;`` was stripped, but one before a trailing comment
(``SELECT ...; -- all orders``, as SQL editors write it) was not, and the run stopped with
``source_read_failed`` and no cause; a ``;`` between two statements can never be read as one.
"""

from __future__ import annotations

import re

#: what ends each quoted or commented stretch that opens with the key (an unclosed one runs to the end)
_CLOSERS = {"'": "'", '"': '"', "`": "`", "[": "]", "--": "\n", "/*": "*/"}


def code_mask(sql: str, *, nested_comments: bool = False) -> str:
    """``sql`` with its text literals, quoted names and comments blanked, character for character: the same
    length, so a position in the mask is one in ``sql``. ``nested_comments``: SQL Server's rule, where a
    ``/*`` inside a comment opens another that needs its own ``*/`` (SQLite ends it at the first)."""
    return _scan(sql, nested_comments)[0]


def _scan(sql: str, nested_comments: bool) -> tuple[str, bool]:
    """The mask, and whether a literal, quoted name or comment is still open at the end."""
    out: list[str] = []
    i = 0
    while i < len(sql):
        opener = sql[i : i + 2] if sql[i : i + 2] in ("--", "/*") else sql[i]
        closer = _CLOSERS.get(opener)
        if closer is None:
            out.append(sql[i])
            i += 1
            continue
        if opener == "/*" and nested_comments:
            end = _nested_comment_end(sql, i)
        else:
            end = sql.find(closer, i + len(opener))
            while end != -1 and closer in ("'", '"', "`", "]") and sql[end + 1 : end + 2] == closer:
                end = sql.find(closer, end + 2)  # a doubled quote (or bracket) inside the literal
        if end == -1:
            out.append(" " * (len(sql) - i))
            return "".join(out), opener != "--"
        stop = end + len(closer)
        out.append(" " * (stop - i))
        i = stop
    return "".join(out), False


def _nested_comment_end(sql: str, start: int) -> int:
    """Where the ``*/`` closing the comment opened at ``start`` begins, counting nested ``/*`` (-1: none)."""
    depth, i = 0, start
    while i < len(sql) - 1:
        pair = sql[i : i + 2]
        if pair == "/*":
            depth += 1
            i += 2
        elif pair == "*/":
            depth -= 1
            if depth == 0:
                return i
            i += 2
        else:
            i += 1
    return -1


def _last_code(mask: str) -> int:
    """The position of the last character of code that is no terminator (-1: none)."""
    for position in range(len(mask) - 1, -1, -1):
        if not mask[position].isspace() and mask[position] != ";":
            return position
    return -1


def statement_text(query: str, *, nested_comments: bool = False) -> str:
    """``query`` without the terminators that end it (each ``;`` followed only by whitespace, comments or
    another ``;``), stripped; empty when it holds no code at all. Comments stay: the wrapper puts a line
    break after the query. Where a literal or comment is still open at the end, the lexer cannot tell
    where anything ends: only trailing ``;`` are dropped, as the engine will judge the text."""
    mask, still_open = _scan(query, nested_comments)
    if still_open:
        return query.strip().rstrip(";").strip()
    last = _last_code(mask)
    if last < 0:
        return ""
    tail = "".join(" " if mask[i] == ";" else query[i] for i in range(last + 1, len(query)))
    return (query[: last + 1] + tail).strip()


def separates_statements(query: str, *, nested_comments: bool = False) -> bool:
    """Whether a ``;`` outside literals, quoted names, comments and parentheses comes before the query's last
    code (``OPENROWSET('a';'b';'c')`` separates its arguments with them). Never where a literal or comment
    is still open at the end: the engine judges such a text."""
    mask, still_open = _scan(query, nested_comments)
    if still_open:
        return False
    depth = 0
    for char in mask[: _last_code(mask) + 1]:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == ";" and depth == 0:
            return True
    return False


# What may come before a query's first word: any Unicode space (form feed and no-break space included),
# a byte order mark, and empty statements.
_LEADING_FILLER = re.compile(r"\A[\s\ufeff;]+")


def opens_with_a_cte(query: str, *, nested_comments: bool = False) -> bool:
    """Whether the query's first word of code is ``WITH``: SQL Server allows a CTE only at the start of a
    statement, never inside the derived table every read wraps the query in."""
    code = _LEADING_FILLER.sub("", code_mask(query, nested_comments=nested_comments), count=1)
    return code[:4].upper() == "WITH" and (len(code) == 4 or not (code[4].isalnum() or code[4] == "_"))
