"""ADR 0090's comparison counts rows as multisets, on a real SQLite file (``SqliteSource.rows_left_out``).

A row the earlier read returns more often than the current one counts as often as it is missing, NULLs
equal: ``EXCEPT``, counted before, saw distinct rows only, so a copy the new read leaves out went unseen and
was deleted, exit 0 (black-box: ``test_windowed_query_left_out``). The two reads meet in one ``UNION ALL``
read through a subquery, where SQLite would give the second arm's values the first arm's affinity: a value
an earlier query read as ``REAL`` must not make the current read's integer past 2**53 equal to it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources.partition_planning import read_definition
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType
from tests.builders import day

BIG = 2**53 + 1  # 9007199254740993: as a double, 9007199254740992.0
#: (id, ts, note, n): ids 1-3 are one row three times over (note NULL), id 4 holds an integer past 2**53
ROWS = [
    (1, "2026-03-06 09:00:00", None, 5),
    (2, "2026-03-06 09:00:00", None, 5),
    (3, "2026-03-06 09:00:00", None, 5),
    (4, "2026-03-06 10:00:00", "a", BIG),
    (5, "2026-03-07 09:00:00", None, 5),
]
DAYS = [[day("2026-03-06", "2026-03-07", "ts")], [day("2026-03-07", "2026-03-08", "ts")]]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    file = tmp_path / "ev.sqlite"
    with sqlite3.connect(file) as db:
        db.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, ts DATETIME NOT NULL, note TEXT, n INTEGER)")
        db.executemany("INSERT INTO ev VALUES (?, ?, ?, ?)", ROWS)
    return file


def source(path: Path, query: str) -> SqliteSource:
    spec = SourceSpec(
        type=SourceType.SQLITE,
        connection=f"sqlite:///{path}",
        table="ev",
        query=query,
        partitioning=Partitioning(kind=PartitionKind.DAY, column="ts"),
    )
    return SqliteSource(path, spec)


def left_out(path: Path, earlier: str, current: str) -> tuple[int, tuple[int | None, ...]]:
    counted = source(path, current).rows_left_out(read_definition(source(path, earlier)._spec), DAYS)
    return counted.total, counted.regions


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        ("SELECT ts, note, n FROM ev WHERE id <> 2", (1, (1, 0))),  # one copy of three missing
        ("SELECT DISTINCT ts, note, n FROM ev", (2, (2, 0))),  # two copies of three
        ("SELECT ts, note, n FROM ev WHERE id IN (4, 5)", (3, (3, 0))),  # all three
        ("SELECT ts, note, n FROM ev WHERE id > 0", (0, (0, 0))),  # every copy again, NULLs equal
        ("SELECT ts, note, n FROM ev WHERE id <> 5", (1, (0, 1))),  # the other day's one row
    ],
)
def test_each_copy_the_current_read_leaves_out_counts_and_nulls_match(
    path: Path, current: str, expected: tuple[int, tuple[int, ...]]
) -> None:
    assert left_out(path, "SELECT ts, note, n FROM ev", current) == expected


def test_a_value_an_earlier_query_read_as_real_is_not_equal_to_the_integer_read_now(path: Path) -> None:
    """9007199254740993 read as ``REAL`` was 9007199254740992.0: the same row with another value, counted
    (as ``EXCEPT`` counted it). Red without ``+column``: the ``UNION ALL``'s first arm gave the current
    read's integer ``REAL`` affinity through the subquery, the two became equal, and nothing was counted."""
    earlier = "SELECT id, ts, CAST(n AS REAL) AS n FROM ev"

    assert left_out(path, earlier, "SELECT id, ts, n FROM ev") == (1, (1, 0))
    assert left_out(path, earlier, "SELECT id, ts, CAST(n AS REAL) AS n FROM ev WHERE 1 = 1") == (0, (0, 0))
