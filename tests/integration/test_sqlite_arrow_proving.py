"""The SQLite Arrow read that proves its own values (``sqlite_arrow_proving``), the ``file_artifact`` export's.

Against a real SQLite file and the real driver: where every value is provable the proving read gives the
row read's chunks value for value; every value the audit's Arrow proof would not prove makes it raise
``ValuesUnproven`` (never a wrong chunk), and then the value audit decides as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from airflow_provider_dpone.adapters.sources import sqlite_arrow_driver
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.ports.source import ValueLimits, ValuesUnproven
from tests.integration.sqlite_arrow_read_rig import assert_same_chunks, table_t_spec
from tests.integration.sqlite_arrow_read_rig import rows_strategy as arrow_read_rows

FIRST = date(2026, 10, 1)
COLUMNS = (
    "id INTEGER PRIMARY KEY, day DATE NOT NULL, qty INTEGER, amount NUMERIC(12,2), moment DATETIME, note TEXT"
)
NAMES = ("id", "day", "qty", "amount", "moment", "note")
WIDE: ValueLimits = {
    "date_min": date(1900, 1, 1),
    "date_max": date(2299, 12, 31),
    "datetime_min": datetime(1900, 1, 1),
    "datetime_max": datetime(2299, 12, 31, 23, 59, 59),
}

pytestmark = pytest.mark.usefixtures("_driver_loads")


@pytest.fixture
def _driver_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sqlite_arrow_driver.wanted(), "adbc-driver-sqlite is a dependency and must load"
    monkeypatch.setattr(sqlite_arrow_driver, "BATCH_ROWS", 3)  # many batches per chunk


def _day(i: int) -> str:
    return (FIRST + timedelta(days=i % 3)).isoformat()


def _write(path: Path, rows: list[tuple[object, ...]], columns: str = COLUMNS) -> None:
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE t ({columns})")
        conn.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(rows[0]))})", rows)
    conn.close()


def _clean(count: int = 12) -> list[tuple[object, ...]]:
    return [
        (i, _day(i), i * 3, i * 1.25, f"{_day(i)} 10:00:{i % 60:02d}", f"n{i}") for i in range(1, count + 1)
    ]


def _row_read(path: Path) -> list[ColumnChunk]:
    source = SqliteSource(path, table_t_spec(), arrow_read=False)
    try:
        bounds = source.plan_partitions()
        source.audit_values(bounds, WIDE)
        return [chunk for b in bounds for chunk in source.read(f"p-{b.label}", b, 5)]
    finally:
        source.close()


def _proving_read(path: Path, limits: ValueLimits = WIDE) -> list[ColumnChunk]:
    source = SqliteSource(path, table_t_spec(), arrow_read=True)
    try:
        bounds = source.plan_partitions()
        assert source.prove_while_reading(bounds, limits)
        return [chunk for b in bounds for chunk in source.read(f"p-{b.label}", b, 5)]
    finally:
        source.close()


def test_a_clean_table_reads_the_row_reads_values_through_the_proving_read(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _write(path, _clean())
    proving = _proving_read(path)
    assert_same_chunks(proving, _row_read(path))
    assert any(isinstance(column, ArrowColumn) for chunk in proving for column in chunk.columns)


#: the Arrow read's own rows, without its float column (the Arrow audit has no proof of floats)
rows_strategy = arrow_read_rows.map(lambda rows: [(row[0], *row[2:]) for row in rows])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_strategy)
def test_any_clean_values_arrive_as_the_row_read_gives_them(
    tmp_path: Path, rows: list[tuple[object, ...]]
) -> None:
    path = tmp_path / "h.sqlite"
    _write(path, [(i, _day(i), *row) for i, row in enumerate(rows, start=1)])
    assert_same_chunks(_proving_read(path), _row_read(path))


# column, SQL literal the audit's Arrow proof would not prove, whether the SQL audit then refuses it (if not,
# the reads take whatever path the audit proves, and give what the row read gives)
UNPROVABLE = {
    "a blob in a text column": ("note", "CAST('abc' AS BLOB)", False),
    "a blob in a datetime column": ("moment", "CAST('2026-10-02 10:00:00' AS BLOB)", True),
    "invalid UTF-8 in a text column": ("note", "CAST(x'ff' AS TEXT)", True),
    "a day that does not exist": ("moment", "'2026-02-30 10:00:00'", True),
    "sub-second digits": ("moment", "'2026-10-02 10:00:00.250'", True),
    "a decimal past its scale": ("amount", "1.234", True),
    "a real in an integer column": ("qty", "1.5", True),
}


@pytest.mark.parametrize("case", list(UNPROVABLE))
def test_a_value_the_audit_would_not_prove_in_arrow_stops_the_proving_read(tmp_path: Path, case: str) -> None:
    column, literal, refused = UNPROVABLE[case]
    path = tmp_path / "s.sqlite"
    _write(path, _clean())
    with sqlite3.connect(path) as conn:
        # the last row of its partition, in the driver's second batch: the first batch types the columns
        conn.execute(f"UPDATE t SET {column} = {literal} WHERE id = 11")
    conn.close()
    with pytest.raises(ValuesUnproven):
        _proving_read(path)
    # then the audit decides, exactly as without the proving read
    source = SqliteSource(path, table_t_spec(), arrow_read=True)
    try:
        bounds = source.plan_partitions()
        if refused:
            with pytest.raises(DponeError) as caught:
                source.audit_values(bounds, WIDE)
            assert caught.value.code is ErrorCode.MANIFEST_INVALID
            assert caught.value.details["column"] == column
        else:
            source.audit_values(bounds, WIDE)
            assert _outcome(
                lambda: [c for b in bounds for c in source.read(f"p-{b.label}", b, 5)]
            ) == _outcome(lambda: _row_read(path))
    finally:
        source.close()


def _outcome(read: Callable[[], list[ColumnChunk]]) -> object:
    """The values a read gives, or the error code it fails with."""
    try:
        chunks = read()
    except DponeError as exc:
        return exc.code
    return [(c.partition_id, c.names, [list(column) for column in c.columns]) for c in chunks]


def test_a_moment_outside_the_targets_range_stops_the_proving_read(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _write(path, _clean())
    narrow: ValueLimits = {**WIDE, "datetime_max": datetime(2026, 10, 2, 10, 0, 4)}
    with pytest.raises(ValuesUnproven):
        _proving_read(path, narrow)
    assert_same_chunks(
        _proving_read(path, {**narrow, "datetime_max": datetime(2026, 10, 3, 10, 0, 12)}), _row_read(path)
    )


def test_a_date_outside_the_targets_range_stops_the_proving_read(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _write(path, _clean())
    with pytest.raises(ValuesUnproven):
        _proving_read(path, {**WIDE, "date_min": date(2026, 10, 2)})


@pytest.mark.parametrize(
    "columns",
    [
        "id INTEGER PRIMARY KEY, day DATE NOT NULL, ratio REAL",  # no Arrow proof of a float column
        "id INTEGER PRIMARY KEY, day DATE NOT NULL, flag BOOLEAN",  # nor of a flag
    ],
)
def test_a_column_the_arrow_audit_does_not_cover_is_audited_first(tmp_path: Path, columns: str) -> None:
    path = tmp_path / "s.sqlite"
    _write(path, [(i, _day(i), 1) for i in range(1, 7)], columns)
    source = SqliteSource(path, table_t_spec(), arrow_read=True)
    try:
        assert not source.prove_while_reading(source.plan_partitions(), WIDE)
        assert source._arrow_proven is None  # the reads stay as they were: the audit runs first
    finally:
        source.close()


def test_the_row_read_never_proves_while_reading(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _write(path, _clean())
    source = SqliteSource(path, table_t_spec(), arrow_read=False)
    try:
        assert not source.prove_while_reading(source.plan_partitions(), WIDE)
    finally:
        source.close()
