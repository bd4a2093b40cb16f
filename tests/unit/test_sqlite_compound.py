"""Which queries and views may be compound, read from their text (erring toward yes)."""

from __future__ import annotations

from airflow_provider_dpone.adapters.sources.sqlite_compound import is_compound, view_select


def test_a_compound_keyword_counts_outside_text_literals_only() -> None:
    assert is_compound("SELECT a FROM t UNION ALL SELECT b FROM u")
    assert is_compound("select a from t\nexcept\nselect a from u")
    assert not is_compound("SELECT a FROM t WHERE note = 'union of two'")
    assert not is_compound("SELECT reunion FROM t")
    assert not is_compound('SELECT "union" FROM t -- a union\n/* union */')


def test_an_apostrophe_in_a_comment_or_a_quoted_name_hides_no_keyword() -> None:
    """Red before: the apostrophe opened a literal that ran to the next one, over the UNION."""
    assert is_compound("SELECT id, v FROM t -- EU customers' rows\nUNION ALL\nSELECT id, w FROM u -- 'x'")
    assert is_compound("SELECT v AS \"owner's value\" FROM t UNION SELECT 'x'")
    assert is_compound("SELECT 'it''s' FROM t UNION SELECT [a'b] FROM u")


def test_a_views_select_is_read_from_its_stored_definition() -> None:
    assert view_select("CREATE VIEW v AS SELECT a FROM t UNION SELECT b FROM u;") == (
        "SELECT a FROM t UNION SELECT b FROM u"
    )
    assert view_select('CREATE TEMP VIEW IF NOT EXISTS "v"(x) AS\nSELECT a FROM t') == "SELECT a FROM t"
    assert view_select("CREATE TABLE t (a)") is None
