"""Paths that read every partition before arming read a SQLite source once: the reads prove the values.

``file_artifact``'s export and ``staged``'s staging insert run in the value audit's place. Black-box
``dpone run`` (in process, so the source's audit and reads can be counted) from a SQLite file into chDB:
a clean table lands exactly with no separate audit; a value the Arrow proof cannot prove sends the run to
the audit, which refuses a bad value with nothing written (exit 2, the column named, no checkpoint, no
target or staging table) or proves a good one for the row read, and the reads run again.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from tests.builders import sqlite_day_manifest
from tests.integration.route_rig import chdb_query, checkpoint_rows, dpone

DDL = "CREATE TABLE vals (id INTEGER PRIMARY KEY, day DATE NOT NULL, amount NUMERIC(12,2), ts DATETIME, note TEXT)"
DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


def make_source(base: Path) -> None:
    rows = [(i, DAYS[i % 3], i * 1.25, f"{DAYS[i % 3]} {i % 24:02d}:00:07", f"n{i}") for i in range(1, 31)]
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(DDL)
        db.executemany("INSERT INTO vals VALUES (?, ?, ?, ?, ?)", rows)
    db.close()


def set_value(base: Path, column: str, literal: str, row_id: int = 29) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(f"UPDATE vals SET {column} = {literal} WHERE id = ?", (row_id,))
    db.close()


PATHS = [("file_artifact", "direct"), ("file_artifact", "staged"), ("lazy_plan", "staged")]


def manifest(base: Path, export: str = "file_artifact", load: str = "direct", order_by: str = "id") -> Path:
    return sqlite_day_manifest(
        base, "vals", state="proving_state", export=export, load=load, order_by=order_by
    )


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_source(tmp_path)
    monkeypatch.setenv("AIRFLOW_CONN_PROVING_STATE", f"sqlite:///{tmp_path / 'state.sqlite'}")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the runs audited the source and opened a partition read."""
    calls = {"audits": 0, "reads": 0}
    audit, read = SqliteSource.audit_values, SqliteSource.read

    def counting_audit(self: SqliteSource, *args: Any) -> None:
        calls["audits"] += 1
        audit(self, *args)

    def counting_read(self: SqliteSource, *args: Any) -> Any:
        calls["reads"] += 1
        return read(self, *args)

    monkeypatch.setattr(SqliteSource, "audit_values", counting_audit)
    monkeypatch.setattr(SqliteSource, "read", counting_read)
    return calls


def source_values(base: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        rows = db.execute("SELECT id, day, amount, ts, CAST(note AS TEXT) FROM vals ORDER BY id").fetchall()
    db.close()
    return [(r[0], r[1], cents(r[2]), r[3], r[4]) for r in rows]


def target_values(base: Path) -> list[tuple[Any, ...]]:
    sql = "SELECT id, toString(day), toString(amount), toString(ts, 'UTC'), note FROM demo.vals ORDER BY id"
    return [(r[0], r[1], cents(r[2]), r[3], r[4]) for r in chdb_query(base, sql)]


def cents(value: object) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.01"))


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_a_clean_table_is_read_once_and_lands_exactly(
    base: Path, counted: dict[str, int], export: str, load: str
) -> None:
    result = dpone("run", str(manifest(base, export, load)), "--run-id", "clean")
    assert result.exit_code == 0, result.output
    assert counted == {"audits": 0, "reads": 3}  # no audit first: the reads proved the values
    assert target_values(base) == source_values(base)


def test_the_lazy_direct_path_still_audits_first(base: Path, counted: dict[str, int]) -> None:
    result = dpone("run", str(manifest(base, "lazy_plan", "direct")), "--run-id", "direct")
    assert result.exit_code == 0, result.output
    assert counted == {"audits": 1, "reads": 3}  # its reads run after arming: the audit comes first
    assert target_values(base) == source_values(base)


@pytest.mark.parametrize(("export", "load"), PATHS)
@pytest.mark.parametrize(
    ("column", "literal", "reason"),
    [
        ("amount", "1.234", "more digits"),
        ("ts", "'2026-11-30 10:00:00.250'", "sub-second"),
        ("ts", "'2106-02-07 06:28:16'", "outside the range"),  # past the target's DateTime
        ("ts", "'2026-02-30 10:00:00'", None),  # a day that does not exist
    ],
)
def test_a_value_the_export_cannot_prove_goes_to_the_audit_which_refuses_it_before_anything_is_written(
    base: Path,
    counted: dict[str, int],
    export: str,
    load: str,
    column: str,
    literal: str,
    reason: str | None,
) -> None:
    set_value(base, column, literal)
    result = dpone("run", str(manifest(base, export, load)), "--run-id", "bad")
    assert result.exit_code == 2, result.output
    assert "manifest_invalid" in result.output and f"column {column!r}" in result.output
    if reason is not None:
        assert reason in result.output
    assert literal.strip("'") not in result.output  # never the value
    assert counted["audits"] == 1
    assert checkpoint_rows(base) == []  # nothing armed, nothing planned: the route is not blocked
    assert (
        chdb_query(base, "SELECT name FROM system.tables WHERE database = 'demo'") == []
    )  # no staging either


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_a_good_value_the_reads_cannot_prove_is_audited_then_read_again_and_lands(
    base: Path, counted: dict[str, int], export: str, load: str
) -> None:
    set_value(base, "note", "CAST('abc' AS BLOB)")  # the Arrow proof stops at a blob; the row read takes it
    result = dpone("run", str(manifest(base, export, load)), "--run-id", "blob")
    assert result.exit_code == 0, result.output
    assert counted["audits"] == 1
    assert counted["reads"] > 3  # read again after the audit (the first reads stopped at the blob)
    assert target_values(base) == source_values(base)
    assert ("abc",) in chdb_query(base, "SELECT note FROM demo.vals WHERE id = 29")


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_a_user_mistake_the_target_would_refuse_stops_the_run_before_any_read(
    base: Path, counted: dict[str, int], export: str, load: str
) -> None:
    # the target is prepared after the reads on these paths; its refusals are checked before them
    result = dpone("run", str(manifest(base, export, load, order_by="idd")), "--run-id", "typo")
    assert result.exit_code == 2, result.output
    assert "sink.order_by" in result.output
    assert counted == {"audits": 0, "reads": 0}
    assert checkpoint_rows(base) == []
    assert chdb_query(base, "SELECT name FROM system.tables WHERE database = 'demo'") == []  # nothing created


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_an_incompatible_existing_target_stops_the_run_before_any_read(
    base: Path, counted: dict[str, int], export: str, load: str
) -> None:
    chdb_query(base, "CREATE DATABASE IF NOT EXISTS demo")
    chdb_query(base, "CREATE TABLE demo.vals (id Int64, day String) ENGINE = MergeTree ORDER BY id")
    result = dpone("run", str(manifest(base, export, load)), "--run-id", "shape")
    assert result.exit_code != 0, result.output
    assert "target_table_incompatible" in result.output
    assert counted == {"audits": 0, "reads": 0}
    assert checkpoint_rows(base) == []
