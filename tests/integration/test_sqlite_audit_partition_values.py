"""The partition column proven by its distinct values: the audit's verdict stays the SQL audit's.

Where an index leads with the partition column, the Arrow audit takes that column's proof from its distinct
values (one walk of the index) and reads only the other columns. Real SQLite files, both audits over the
same partitions, the partition column spoiled in every way that keeps a row inside some day's range (its
storage class, a time of day, trailing spaces, a NUL, bytes that are not UTF-8), under the column's own
collations and index shapes: the verdict is always the SQL audit's, a refused value is never proven, and a
bad partition value on ``lazy_plan`` + ``direct`` still stops the run before arming with nothing written.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import sqlite_arrow_audit, sqlite_arrow_driver, value_audit
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.errors import DponeError
from tests.integration.route_rig import (
    chdb_query,
    checkpoint_rows,
    dpone,
    manifest_at,
    source_rows,
    target_rows,
)
from tests.integration.sqlite_audit_rig import FIRST, orders_spec

pytestmark = pytest.mark.usefixtures("_driver_loads")

DAYS = 6
PER_DAY = 20

#: the partition column's declared collation
COLLATIONS = ("", "COLLATE NOCASE", "COLLATE RTRIM")
#: indexes the table may have; "lead", "desc" and "binary" lead with the column in BINARY order (for
#: "binary" whatever the column's own collation is)
INDEXES = {
    "lead": "CREATE INDEX o_lead ON orders (order_date, id)",
    "binary": "CREATE INDEX o_binary ON orders (order_date COLLATE BINARY, id)",
    "desc": "CREATE INDEX o_desc ON orders (order_date DESC, id)",
    "nocase": "CREATE INDEX o_nocase ON orders (order_date COLLATE NOCASE, id)",
    "partial": "CREATE INDEX o_partial ON orders (order_date, id) WHERE id > 3",
    "none": "",
}
#: partition values (SQL literals) a row may hold, each inside or next to day 2's range
DAY = (FIRST + timedelta(days=2)).isoformat()
SPOILS = (
    f"'{DAY} '",  # trailing space: inside the range; one value with it under RTRIM
    f"'{DAY}  '",
    f"'{DAY}x'",
    f"'{DAY} 10:00:00'",  # a time of day
    f"'{DAY} 00:00:00'",  # midnight: the converters take it as the day
    f"'{DAY}T00:00:00Z'",
    f"'{DAY} 00:00:00.5'",
    f"CAST('{DAY}' AS BLOB)",  # outside every text range
    f"'{DAY}' || char(0)",
    f"'{DAY}' || char(0) || '10:00'",
    f"CAST(X'{DAY.encode().hex()}FF' AS TEXT)",  # not UTF-8
    f"CAST(X'{DAY.encode().hex()}20C3A9' AS TEXT)",  # a space and é: UTF-8, not a date
    "20261103",
    "2026.5",
    "NULL",
    f"'{DAY[:-1]}9'",  # another day of the month, inside no planned range... or its own
    "'2026-11-31'",  # no such day
    f"lower('{DAY}')",
)


@pytest.fixture
def _driver_loads() -> None:
    assert sqlite_arrow_driver.wanted(), "adbc-driver-sqlite is a dependency and must load"


def _orders(path: Path, collation: str, index: str, spoiled: dict[int, str]) -> None:
    """DAYS days of PER_DAY clean rows, the partition column declared with ``collation`` and indexed as
    ``INDEXES[index]``; ``spoiled``: row id -> the partition column's SQL literal."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute(
            f"CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE {collation}, customer TEXT NOT NULL,"
            " amount NUMERIC(12,2) NOT NULL, updated_at DATETIME NOT NULL)"
        )
        if INDEXES[index]:
            db.execute(INDEXES[index])
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
            (
                (
                    i,
                    (FIRST + timedelta(days=i // PER_DAY)).isoformat(),
                    f"customer-{i % 7}",
                    i * 1.25,
                    f"{(FIRST + timedelta(days=i // PER_DAY)).isoformat()} {i % 24:02d}:{i % 60:02d}:00",
                )
                for i in range(PER_DAY * DAYS)
            ),
        )
        for row_id, literal in spoiled.items():
            db.execute(f"UPDATE orders SET order_date = {literal} WHERE id = ?", (row_id,))


class _Spy:
    """Which proof the Arrow audit took for the partition column: its values, or its read rows."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_values = 0
        self.skipped: list[frozenset[str]] = []
        values_statement = sqlite_arrow_audit.AuditRead.values_statement
        statement = sqlite_arrow_audit.AuditRead.statement

        def counting_values(*args: Any) -> Any:
            self.by_values += 1
            return values_statement(*args)

        def recording(read: Any, source: str, run: Any, skip: frozenset[str] = frozenset()) -> Any:
            self.skipped.append(skip)
            return statement(read, source, run, skip)

        monkeypatch.setattr(sqlite_arrow_audit.AuditRead, "values_statement", staticmethod(counting_values))
        monkeypatch.setattr(sqlite_arrow_audit.AuditRead, "statement", recording)


def _audit(path: Path, *, arrow: bool, by_values: bool = True) -> tuple[dict[str, Any] | None, bool]:
    """(the refusal's public parts or None when clean, whether the Arrow audit proved the run);
    ``by_values=False``: the Arrow audit as before the values' proof, reading every audited column."""
    source = SqliteSource(path, orders_spec(), arrow_read=arrow)
    if not by_values:
        source._values_provable = lambda read: None  # type: ignore[method-assign]
    proofs: list[bool] = []
    original = source._arrow_audit_clean

    def spy(*args: Any) -> bool:
        proofs.append(original(*args))
        return proofs[-1]

    source._arrow_audit_clean = spy  # type: ignore[method-assign,assignment]
    try:
        try:
            source.audit_values(source.plan_partitions(), None)
        except DponeError as exc:
            return {"code": exc.code, "message": str(exc), "details": exc.details}, any(proofs)
        return None, any(proofs)
    finally:
        source.close()


def _audit_runs(path: Path) -> int:
    """How many groups (statements) one audit of the table reads, on as many connections as it uses."""
    source = SqliteSource(path, orders_spec())
    try:
        return len(value_audit.audit_runs(source.plan_partitions(), source._audit_connections))
    finally:
        source.close()


def _same_verdicts(path: Path) -> tuple[dict[str, Any] | None, bool]:
    """The verdict with the values' proof is the SQL audit's, and it proves a run only where reading the
    column (the Arrow audit before it) proves it too."""
    with_arrow, proven = _audit(path, arrow=True)
    sql_only, _ = _audit(path, arrow=False)
    _, read_proven = _audit(path, arrow=True, by_values=False)
    assert with_arrow == sql_only
    if proven:
        assert sql_only is None, "the Arrow audit proved a run the SQL audit refuses"
        assert read_proven, "the values proved a column whose rows the Arrow proof does not take"
    return with_arrow, proven


@pytest.mark.parametrize("index", ["lead", "desc"])
def test_an_index_leading_with_the_partition_column_proves_it_by_its_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: str
) -> None:
    path = tmp_path / "orders.sqlite"
    _orders(path, "", index, {})
    assert _same_verdicts(path) == (None, True)
    spy = _Spy(monkeypatch)
    assert _audit(path, arrow=True) == (None, True)
    assert spy.by_values >= 1
    assert spy.skipped and all(skip == {"order_date"} for skip in spy.skipped)  # never read in full


@pytest.mark.parametrize("index", ["nocase", "partial", "none"])
def test_without_such_an_index_the_partition_column_is_read_with_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: str
) -> None:
    path = tmp_path / "orders.sqlite"
    _orders(path, "", index, {})
    assert _same_verdicts(path) == (None, True)
    spy = _Spy(monkeypatch)
    assert _audit(path, arrow=True) == (None, True)
    assert spy.by_values == 0 and all(not skip for skip in spy.skipped)


def test_more_distinct_values_than_the_cap_read_the_column_with_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_arrow_audit, "DISTINCT_VALUES_MAX", 2)
    path = tmp_path / "orders.sqlite"
    _orders(path, "", "lead", {})
    spy = _Spy(monkeypatch)
    assert _audit(path, arrow=True) == (None, True)
    assert spy.by_values >= 1 and all(not skip for skip in spy.skipped)


@pytest.mark.parametrize("collation", COLLATIONS, ids=["binary", "nocase", "rtrim"])
@pytest.mark.parametrize("literal", SPOILS)
def test_no_spoiled_partition_value_is_proven_and_the_verdict_is_the_sql_audits(
    tmp_path: Path, collation: str, literal: str
) -> None:
    path = tmp_path / "orders.sqlite"
    # an index in BINARY order whatever the column's collation: the values' proof runs on every table here
    _orders(path, collation, "binary", {PER_DAY * 2 + 5: literal})
    _same_verdicts(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    collation=st.sampled_from(COLLATIONS),
    index=st.sampled_from(sorted(INDEXES)),
    spoiled=st.dictionaries(st.integers(0, PER_DAY * DAYS - 1), st.sampled_from(SPOILS), max_size=3),
)
def test_the_verdict_is_the_sql_audits_whatever_the_collation_index_and_values(
    collation: str, index: str, spoiled: dict[int, str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "orders.sqlite"
        _orders(path, collation, index, spoiled)
        _same_verdicts(path)


def test_a_bad_partition_value_stops_the_direct_run_before_arming_and_the_fixed_run_lands_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AIRFLOW_CONN_SPELLING_STATE", f"sqlite:///{tmp_path / 'state.sqlite'}")
    spy = _Spy(monkeypatch)
    create_demo_source(tmp_path / "source.sqlite", 600, days=6)
    with contextlib.closing(sqlite3.connect(tmp_path / "source.sqlite")) as db, db:
        (day, old) = db.execute("SELECT order_date, order_date FROM orders WHERE id = 300").fetchone()
        db.execute("UPDATE orders SET order_date = ? WHERE id = 300", (f"{day} 23:00:00",))
    path = manifest_at(tmp_path, strategy="incremental_append")

    refused = dpone("run", str(path), "--run-id", "bad")
    assert refused.exit_code == 2, refused.output
    assert "manifest_invalid" in refused.output and "column 'order_date'" in refused.output
    assert "time of day" in refused.output and "23:00:00" not in refused.output
    assert checkpoint_rows(tmp_path) == []  # nothing armed: the route is not blocked
    assert not (tmp_path / "clickhouse").exists() or chdb_query(tmp_path, "EXISTS TABLE demo.orders") == [
        (0,)
    ]
    assert spy.by_values >= 1  # the values' proof met the bad value (the SQL audit named it)

    with contextlib.closing(sqlite3.connect(tmp_path / "source.sqlite")) as db, db:
        db.execute("UPDATE orders SET order_date = ? WHERE id = 300", (old,))
    spy.skipped.clear()
    fixed = dpone("run", str(path), "--run-id", "fixed")
    assert fixed.exit_code == 0, fixed.output
    assert spy.skipped and all(skip == {"order_date"} for skip in spy.skipped)
    assert target_rows(tmp_path) == source_rows(tmp_path)  # every value exactly, the amounts to the cent


def test_the_values_and_the_rows_of_a_group_are_read_in_one_snapshot(tmp_path: Path) -> None:
    """A row written between the two statements of a group is seen by neither: the values' proof and the
    rows' proof cover the same rows, as the one statement before them did."""
    path = tmp_path / "orders.sqlite"
    _orders(path, "", "lead", {})
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA journal_mode = WAL")  # a writer may commit while the snapshot is read
    count = ("SELECT 0 AS m, 0 AS n UNION ALL SELECT 1, count(*) FROM orders", ())

    def counted(connection: sqlite_arrow_driver.Connection) -> int:
        with sqlite_arrow_driver.batches(connection, count) as batches:
            return int(pa.Table.from_batches(list(batches)).column(1)[1].as_py())

    def write() -> None:
        # another process, as a source's writer is: two SQLite libraries in one process do not see each
        # other's file locks (the writer's close would take itself for the last connection)
        insert = f"INSERT INTO orders VALUES (NULL, '{DAY}', 'late', 1.25, '{DAY} 08:00:00')"
        code = f"import sqlite3; db = sqlite3.connect({str(path)!r}); db.execute({insert!r}); db.commit()"
        subprocess.run([sys.executable, "-c", code], check=True)

    connection = sqlite_arrow_driver.connect(path)
    try:
        with sqlite_arrow_driver.snapshot(connection):
            before = counted(connection)
            write()
            assert counted(connection) == before
        assert counted(connection) == before + 1  # the next snapshot sees it
        write()  # without one, the second statement would have
        assert counted(connection) == before + 2
        with pytest.raises(ZeroDivisionError), sqlite_arrow_driver.snapshot(connection):
            counted(connection)
            raise ZeroDivisionError
        with sqlite_arrow_driver.snapshot(connection):  # the failed one was ended: a new one begins
            assert counted(connection) == before + 2
    finally:
        connection.close()


def test_each_group_reads_its_values_and_its_rows_inside_one_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "orders.sqlite"
    _orders(path, "", "lead", {})
    events: list[tuple[int, str]] = []
    snapshot, batches = sqlite_arrow_driver.snapshot, sqlite_arrow_driver.batches

    @contextlib.contextmanager
    def recorded_snapshot(connection: Any) -> Any:
        events.append((id(connection), "begin"))
        with snapshot(connection):
            yield
        events.append((id(connection), "commit"))

    def recorded_batches(connection: Any, statement: Any, rows: Any = None) -> Any:
        kind = (
            "values"
            if "GROUP BY" in statement[0]
            else "rows"
            if "dpone_arrow_blobs" in statement[0]
            else "other"
        )
        events.append((id(connection), kind))
        return batches(connection, statement, rows)

    monkeypatch.setattr(sqlite_arrow_driver, "snapshot", recorded_snapshot)
    monkeypatch.setattr(sqlite_arrow_driver, "batches", recorded_batches)
    assert _audit(path, arrow=True) == (None, True)
    per_connection: dict[int, list[str]] = {}
    for connection, kind in events:
        if kind != "other":  # the connection's own PRAGMA, BEGIN and COMMIT
            per_connection.setdefault(connection, []).append(kind)
    # a connection back in the pool may read the next group too: one snapshot per group all the same
    one_group = ["begin", "values", "rows", "commit"]
    groups = [kinds for kinds in per_connection.values() if "values" in kinds]
    assert groups and all(kinds == one_group * (len(kinds) // 4) for kinds in groups)
    assert sum(len(kinds) // 4 for kinds in groups) == _audit_runs(path)
