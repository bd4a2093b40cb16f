"""A compound query's REAL column never delivers a rounded integer: past 2**53 the run stops before arming.

Found by a helper: ``SELECT id, v FROM t UNION ALL SELECT id, w FROM u`` (``v`` REAL, ``w`` untyped holding
9007199254740993) returns the integer when run alone, but read as a subquery, as every partition read is,
the column takes its first arm's REAL affinity and SQLite rounds it: the target held 9007199254740992, exit 0,
on every path. A view with such a definition did the same. Real SQLite and chDB; values compared exactly.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    chdb_at,
    checkpoints,
    query_rows,
    run,
    write_manifest,
)

TABLE = "demo.numbers"
UNION = "SELECT id, v FROM t UNION ALL SELECT id, w FROM u"


def make_source(base: Path, later: object) -> None:
    with sqlite3.connect(base / "source.sqlite") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v REAL)")
        conn.execute("CREATE TABLE u (id INTEGER PRIMARY KEY, w)")
        conn.execute("INSERT INTO t VALUES (1, 1.5)")
        conn.execute("INSERT INTO u VALUES (2, ?)", (later,))
        conn.execute(f"CREATE VIEW numbers AS {UNION}")


def manifest(base: Path, *, view: bool = False, export: str = "lazy_plan", load: str = "direct") -> Path:
    read = "  table: numbers" if view else f"  table: t\n  query: {UNION}"
    return write_manifest(
        base,
        source=f"  type: sqlite\n  connection: sqlite:///source.sqlite\n{read}",
        partitioning="{kind: integer_range, column: id, size: 10}",
        connection=CHDB_CONNECTION,
        table=TABLE,
        export=export,
        load=load,
    )


@pytest.mark.parametrize(
    ("view", "export", "load"),
    [
        (False, "lazy_plan", "direct"),
        (False, "lazy_plan", "staged"),
        (False, "file_artifact", "direct"),
        (True, "lazy_plan", "direct"),
    ],
)
def test_an_integer_past_2_53_in_a_compound_real_column_stops_before_arming(
    tmp_path: Path, view: bool, export: str, load: str
) -> None:
    make_source(tmp_path, 2**53 + 1)
    path = manifest(tmp_path, view=view, export=export, load=load)

    with pytest.raises(DponeError) as stopped:
        run(path, "r1")

    assert stopped.value.code is ErrorCode.MANIFEST_INVALID
    assert stopped.value.details["column"] == "v"
    assert stopped.value.details["reason"] == "integer_rounded_by_compound_query"
    assert checkpoints(path) == []


def test_a_compound_real_column_whose_integers_a_double_holds_moves_them_exactly(tmp_path: Path) -> None:
    make_source(tmp_path, 2**53)

    run(manifest(tmp_path), "r1")

    assert query_rows(chdb_at(tmp_path), f"SELECT id, v FROM {TABLE} ORDER BY id") == [
        (1, 1.5),
        (2, float(2**53)),
    ]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id, v FROM t -- EU customers' rows\n  UNION ALL SELECT id, w FROM u -- US customers' rows",
        "SELECT id, CAST(v AS REAL) AS v FROM t UNION ALL SELECT id, w FROM u",
    ],
    ids=["apostrophe-in-a-comment", "cast-in-the-first-arm"],
)
def test_a_compound_spelled_otherwise_still_stops_before_a_converted_integer_moves(
    tmp_path: Path, query: str
) -> None:
    """Red before: an apostrophe in a comment hid the UNION from the check, and a ``CAST(.. AS REAL)`` first
    arm (a String column: no declared type) turned 9007199254740993 into '9007199254740992.0', exit 0."""
    make_source(tmp_path, 2**53 + 1)
    path = manifest(tmp_path)
    text = path.read_text("utf-8").replace(
        f"  query: {UNION}", "  query: |\n    " + query.replace("\n", "\n  ")
    )
    path.write_text(text, "utf-8")

    with pytest.raises(DponeError) as stopped:
        run(path, "r1")

    assert stopped.value.details["reason"] == "integer_rounded_by_compound_query"
    assert checkpoints(path) == []


def test_a_small_integer_under_a_cast_first_arm_stops_too_for_its_text_would_read_123_0(
    tmp_path: Path,
) -> None:
    make_source(tmp_path, 123)
    path = manifest(tmp_path)
    path.write_text(
        path.read_text("utf-8").replace(
            UNION, "SELECT id, CAST(v AS REAL) AS v FROM t UNION ALL SELECT id, w FROM u"
        ),
        "utf-8",
    )

    with pytest.raises(DponeError) as stopped:
        run(path, "r1")

    assert stopped.value.details["column"] == "v"
