"""A ``source.query`` is read as one statement: its terminators and comments are told from its code."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from airflow_provider_dpone.contracts.query_text import (
    code_mask,
    opens_with_a_cte,
    separates_statements,
    statement_text,
)

_ENDINGS = st.lists(st.sampled_from([";", " ", "\n", "-- done\n", "/* c; */", "-- a; b"]), max_size=6)


@given(st.text())
def test_the_mask_keeps_every_position(sql: str) -> None:
    assert len(code_mask(sql)) == len(sql)


@pytest.mark.parametrize(
    "select",
    [
        "SELECT * FROM orders",
        "SELECT ';' AS s, \"a;b\", [c;d] FROM orders -- x",
        "SELECT 1 /* ; */ FROM t",
        "WITH a AS (SELECT 1) SELECT * FROM a",
        "SELECT * FROM OPENROWSET('Microsoft.ACE.OLEDB.12.0';'x';'y', 'SELECT 1') AS r",
    ],
)
@given(ending=_ENDINGS)
def test_terminators_and_comments_after_the_statement_are_no_second_one(
    select: str, ending: list[str]
) -> None:
    """Red before: ``SELECT ...; -- all orders`` kept its ``;`` inside the read's parentheses, and every
    run stopped with ``source_read_failed`` and no cause."""
    query = select + "".join(ending)
    assert not separates_statements(query)
    kept = statement_text(query)
    assert kept.startswith(select.rstrip(" -x").rstrip())
    assert code_mask(kept).strip() == code_mask(select).strip()


@pytest.mark.parametrize(
    "query", ["SELECT 1; SELECT 2", "DELETE FROM orders; SELECT * FROM orders", "SELECT 1;\n-- x\nSELECT 2;"]
)
def test_a_query_of_two_statements_is_refused_when_the_manifest_is_read(query: str) -> None:
    assert separates_statements(query)
    with pytest.raises(ValueError, match="more than one statement"):
        SourceSpec.model_validate(
            {"type": SourceType.SQLITE, "connection": "src", "table": "orders", "query": query}
        )


@pytest.mark.parametrize("query", [";", " ; ;", "-- only a comment", "/* nothing */;"])
def test_a_query_of_terminators_and_comments_alone_is_empty(query: str) -> None:
    with pytest.raises(ValueError, match="the query is empty"):
        SourceSpec.model_validate(
            {"type": SourceType.SQLITE, "connection": "src", "table": "orders", "query": query}
        )


_NESTED_NOTE = "SELECT id, tag FROM dbo.items\n/* TODO /* see ticket 12 */ can't filter by region yet */\n"


def test_sql_servers_nested_comments_hide_quotes_and_terminators() -> None:
    """Red before: ending the comment at the first ``*/`` (SQLite's rule) took ``can't`` for a string, blanked
    the ``;`` of the real literal ``';'`` (the read filtered ``<> ' '``), and refused a ``;`` in a nested
    comment as a second statement."""
    query = _NESTED_NOTE + "WHERE tag <> ';'"
    assert statement_text(query, nested_comments=True) == query.strip()
    disabled = "SELECT id FROM dbo.items\n/* off:\n  /* by region */ AND region = 1;\n*/"
    assert not separates_statements(disabled, nested_comments=True)
    for source in (query, disabled):
        SourceSpec.model_validate(
            {"type": SourceType.MSSQL, "connection": "src", "table": "dbo.items", "query": source}
        )


def test_text_whose_literal_or_comment_never_closes_is_left_to_the_engine() -> None:
    """Where the lexer cannot tell where anything ends, it changes nothing but trailing ``;`` and refuses
    nothing: the engine judges the text (an unclosed comment is its syntax error, not a rewritten filter)."""
    unclosed = "SELECT id FROM t WHERE tag <> ';' /* no end;"
    assert statement_text(unclosed) == unclosed.rstrip(";")
    assert not separates_statements("SELECT 1; SELECT 'open")
    assert statement_text("SELECT 1 -- no newline at the end;") == "SELECT 1 -- no newline at the end;"


@pytest.mark.parametrize(
    "query",
    [
        "WITH b AS (SELECT * FROM dbo.orders) SELECT * FROM b",
        "/* big ones */ with b AS (SELECT 1 AS x) SELECT x FROM b",
        "-- note\n  WITH\nb AS (SELECT 1 AS x) SELECT x FROM b",
    ],
)
def test_a_sql_server_query_that_starts_with_a_cte_is_refused_saying_how_to_write_it(query: str) -> None:
    """T-SQL allows WITH only at the start of a statement, and every read wraps the query as a derived
    table: validation passed and every read would fail. SQLite reads such a query wrapped, so it passes."""
    with pytest.raises(ValueError, match="derived table"):
        SourceSpec.model_validate(
            {"type": SourceType.MSSQL, "connection": "src", "table": "dbo.orders", "query": query}
        )
    SourceSpec.model_validate(
        {"type": SourceType.SQLITE, "connection": "src", "table": "orders", "query": query}
    )


def test_a_word_that_only_begins_with_with_is_no_cte() -> None:
    assert not opens_with_a_cte("WITHDRAWN")
    assert not opens_with_a_cte("SELECT 'WITH' AS w")
    assert opens_with_a_cte(";WITH b AS (SELECT 1) SELECT * FROM b")


@pytest.mark.parametrize("filler", ["\f", "\v", "\u00a0", "\ufeff", "\u2003", "\ufeff\n;\f"])
def test_a_cte_behind_any_unicode_space_or_byte_order_mark_is_still_found(filler: str) -> None:
    """A query pasted from an editor may start with a form feed, a no-break space or a byte order mark:
    the first word of code is still WITH, and every wrapped read of it would fail."""
    assert opens_with_a_cte(filler + "WITH b AS (SELECT 1 AS x) SELECT x FROM b")
    assert not opens_with_a_cte(filler + "SELECT 1 AS x")
