"""The hook's statement check: one read statement passes, anything else is refused by a fixed phrase.

This is the message in front of ``readonly=1`` (test_clickhouse_hook_reads.py shows the target refusing
what this check lets through); here only its classification, quotes and comments included.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.read_statements import refusal_reason

READS = [
    "SELECT 1",
    "  select count() FROM db.t;  ",
    "-- a comment\nSELECT 1 -- trailing",
    "/* block */ (SELECT 1) UNION ALL (SELECT 2)",
    "WITH 2 AS x SELECT x",
    "SHOW TABLES FROM db",
    "DESCRIBE TABLE db.t",
    "DESC db.t",
    "EXISTS TABLE db.t",
    "SELECT 'DROP TABLE db.t; INSERT INTO x' AS s",
    'SELECT "weird;name" FROM `db`.`t;x`',
    "SELECT 'it''s' AS s; -- only a comment after the semicolon",
    "SELECT 'a\\'; DROP TABLE t' AS s",
    "SELECT col_name, check_type, check_result FROM (SELECT 'id' AS col_name) AS check_columns",
]

REFUSED = {
    "INSERT INTO db.t VALUES (1)": "not a read",
    "insert into db.t select 1": "not a read",
    "CREATE TABLE db.x (a UInt8) ENGINE = Memory": "not a read",
    "DROP TABLE db.t": "not a read",
    "TRUNCATE TABLE db.t": "not a read",
    "ALTER TABLE db.t DELETE WHERE 1": "not a read",
    "OPTIMIZE TABLE db.t FINAL": "not a read",
    "SET readonly = 0": "not a read",
    "SYSTEM FLUSH LOGS": "not a read",
    "RENAME TABLE db.t TO db.u": "not a read",
    "/* SELECT */ DROP TABLE db.t": "not a read",
    "-- SELECT\nDROP TABLE db.t": "not a read",
    "SELECT 1; DROP TABLE db.t": "more than one statement",
    "SELECT 1;DROP TABLE db.t": "more than one statement",
    "SELECT 1; 'x'": "more than one statement",
    "SELECT * FROM db.t INTO OUTFILE 'rows.tsv'": "writes a file",
    "": "empty",
    "  ;  -- nothing": "empty",
}


@pytest.mark.parametrize("sql", READS)
def test_one_read_statement_passes(sql: str) -> None:
    assert refusal_reason(sql) is None


@pytest.mark.parametrize("sql", sorted(REFUSED))
def test_anything_else_is_refused_with_a_fixed_phrase(sql: str) -> None:
    reason = refusal_reason(sql)
    assert reason is not None and REFUSED[sql] in reason
    assert "db.t" not in reason  # never the SQL


@given(st.text(max_size=80))
def test_a_second_statement_after_a_read_is_always_refused(tail: str) -> None:
    sql = f"SELECT 1; DROP TABLE db.t {tail}"
    assert refusal_reason(sql) is not None
