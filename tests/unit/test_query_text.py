"""A ``source.query`` is read as one statement: its terminators and comments are told from its code."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.manifest import SourceSpec
from airflow_provider_dpone.contracts.query_text import code_mask, separates_statements, statement_text

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
        SourceSpec.model_validate({"type": "sqlite", "connection": "src", "table": "orders", "query": query})


@pytest.mark.parametrize("query", [";", " ; ;", "-- only a comment", "/* nothing */;"])
def test_a_query_of_terminators_and_comments_alone_is_empty(query: str) -> None:
    with pytest.raises(ValueError, match="the query is empty"):
        SourceSpec.model_validate({"type": "sqlite", "connection": "src", "table": "orders", "query": query})
