"""The SQLite Arrow read (ADBC) gives exactly the row read's chunks, or is not used.

Every test reads real SQLite files twice: once with the Arrow read proven by the value audit, once with
the row read (``arrow_read=False``), and compares every value of every chunk, with the Arrow driver's
batches made tiny so that NULL stretches, type pinning and chunk joins cross batch borders.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import sqlite_arrow, sqlite_arrow_driver, sqlite_source
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from tests.integration.sqlite_arrow_read_rig import assert_same_chunks, rows_strategy, table_t_spec

DAYS = 4
FIRST = date(2026, 10, 1)
COLUMNS = (
    "id INTEGER PRIMARY KEY, day DATE NOT NULL, qty INTEGER, ratio REAL, amount NUMERIC(12,2), "
    "moment DATETIME, note TEXT"
)
NAMES = ("id", "day", "qty", "ratio", "amount", "moment", "note")

# the driver is a dependency: these tests fail, never skip, when it does not load
pytestmark = pytest.mark.usefixtures("_driver_loads")


@pytest.fixture
def _driver_loads() -> None:
    assert sqlite_arrow_driver.wanted(), "adbc-driver-sqlite is a dependency and must load"


@pytest.fixture(autouse=True)
def _tiny_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_arrow_driver, "BATCH_ROWS", 3)


def _write(path: Path, rows: list[tuple[object, ...]]) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE t ({COLUMNS})")
        conn.execute("CREATE INDEX t_day ON t (day, id)")
        conn.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(NAMES))})", rows)
    conn.close()


def _small_table(path: Path) -> None:
    """Eight clean rows, one storage class per column, over the four days."""
    _write(path, [(i, _day(i), 1, 1.5, 2.25, "2026-10-01 00:00:00", "x") for i in range(1, 9)])


def _proven_by_default(path: Path) -> bool:
    """Whether a source built as a run builds it (no ``arrow_read``) proves the Arrow read in its audit."""
    source = SqliteSource(path, table_t_spec())
    try:
        source.audit_values(source.plan_partitions(), None)
        return source._arrow_proven is not None
    finally:
        source.close()


def _read(path: Path, *, arrow: bool) -> tuple[list[ColumnChunk], bool]:
    """Every partition's chunks after the audit, and whether the Arrow read was proven."""
    source = SqliteSource(path, table_t_spec(), arrow_read=arrow)
    try:
        bounds = source.plan_partitions()
        source.audit_values(bounds, None)
        proven = source._arrow_proven is not None
        chunks = [chunk for b in bounds for chunk in source.read(f"p-{b.label}", b, 5)]
    finally:
        source.close()
    return chunks, proven


def _day(i: int) -> str:
    return (FIRST + timedelta(days=i % DAYS)).isoformat()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_strategy, leading_nulls=st.integers(0, 8))
def test_the_arrow_read_gives_every_value_of_the_row_read(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[object, ...]], leading_nulls: int
) -> None:
    # a stretch of all-NULL rows first: the driver would type those columns int64 without the literal row
    nulls = [(None, None, None, None, None)] * leading_nulls
    table = [(i + 1, _day(0 if i < leading_nulls else i), *v) for i, v in enumerate(nulls + rows)]
    path = tmp_path_factory.mktemp("arrow") / "s.sqlite"
    _write(path, table)
    arrow, proven = _read(path, arrow=True)
    rowwise, _ = _read(path, arrow=False)
    assert proven
    assert_same_chunks(arrow, rowwise)


def test_the_demo_shape_reads_the_same_and_in_the_same_order(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    table = [
        (
            i,
            _day(i * 7 % 11),
            i % 5,
            i / 8,
            (i * 37 % 1000) / 4 if i % 3 else i,
            f"2026-10-0{1 + i % 4} 10:00:0{i % 10}",
            f"n{i}",
        )
        for i in range(1, 120)
    ]
    _write(path, table)
    arrow, proven = _read(path, arrow=True)
    rowwise, _ = _read(path, arrow=False)
    assert proven
    assert_same_chunks(arrow, rowwise)
    # the row read's order, day by day, then by key: the literal row changes nothing of it
    assert [i for chunk in arrow for i in chunk.columns[0]] == [
        row[0] for row in sorted(table, key=lambda row: (row[1], row[0]))
    ]


@pytest.mark.parametrize("blob", [b"\xff\x00bytes", b"valid text"], ids=["not-utf8", "utf8"])
def test_a_blob_in_a_text_column_keeps_the_row_read(tmp_path: Path, blob: bytes) -> None:
    # the driver would hand the blob's bytes over as text: the audit's blob count rules the read out
    path = tmp_path / "s.sqlite"
    _small_table(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE t SET note = ? WHERE id = 7", (blob,))
    conn.close()
    arrow, proven = _read(path, arrow=True)
    rowwise, _ = _read(path, arrow=False)
    assert not proven
    assert_same_chunks(arrow, rowwise)
    assert blob in [v for chunk in arrow for v in chunk.columns[NAMES.index("note")]]


def test_text_in_a_decimal_column_rules_the_arrow_read_out() -> None:
    # NUMERIC affinity turns numeric text into numbers, so only a source.query can hand a decimal column
    # text: the audit counts it (its storage fact) and the plan refuses the read on a count above zero
    from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

    schema = TableSchema(columns=(ColumnSpec(name="amount", clickhouse_type="Decimal(12, 2)"),))
    assert sqlite_arrow.arrow_plan(schema, lambda column: False, {"amount": 0}) is not None
    assert sqlite_arrow.arrow_plan(schema, lambda column: False, {"amount": 1}) is None
    assert sqlite_arrow.arrow_plan(schema, lambda column: False, {}) is None  # not counted: not proven
    assert sqlite_arrow.arrow_plan(schema, lambda column: False, None) is None  # no audit


def test_a_partition_the_audit_did_not_cover_takes_the_row_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite"
    _small_table(path)
    source = SqliteSource(path, table_t_spec(), arrow_read=True)
    used: list[PartitionBounds] = []
    original = SqliteSource._arrow_stream

    def spy(self: SqliteSource, *args: object) -> Iterator[ColumnChunk]:
        used.append(args[0])  # type: ignore[arg-type]
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteSource, "_arrow_stream", spy)
    try:
        bounds = source.plan_partitions()
        source.audit_values(bounds[:2], None)
        for b in bounds:
            list(source.read(b.label, b, 5))
    finally:
        source.close()
    assert used == [b.label for b in bounds[:2]]


def test_the_reads_setting_applies_only_where_every_partition_takes_the_arrow_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sqlite_arrow_driver.READS_SETTING, "2")
    path = tmp_path / "s.sqlite"
    _small_table(path)
    for arrow in (True, False):
        source = SqliteSource(path, table_t_spec(), arrow_read=arrow)
        try:
            bounds = source.plan_partitions()
            assert source.concurrent_reads(bounds) == 1  # no audit yet: the row read, one at a time
            source.audit_values(bounds[:2], None)
            expected = 2 if arrow else 1
            assert source.concurrent_reads(bounds[:2]) == expected
            assert source.concurrent_reads(bounds) == 1  # a partition outside the audit reads by row
        finally:
            source.close()


@pytest.mark.parametrize(
    ("setting", "reads"), [(None, 3), ("", 3), ("1", 1), ("2", 2), ("9", 4), ("0", 1), ("two", 1), ("-2", 1)]
)
def test_the_reads_setting_is_the_default_unless_set_and_one_when_set_wrong(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, reads: int
) -> None:
    if setting is None:
        monkeypatch.delenv(sqlite_arrow_driver.READS_SETTING, raising=False)
    else:
        monkeypatch.setenv(sqlite_arrow_driver.READS_SETTING, setting)
    assert sqlite_arrow_driver.reads_at_once(default=3) == reads


def test_two_reads_at_once_by_default_on_two_cores_one_on_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sqlite_arrow_driver.READS_SETTING, raising=False)
    path = tmp_path / "s.sqlite"
    _small_table(path)
    for cores, reads in ((1, 1), (2, 2), (8, 2)):
        monkeypatch.setattr(sqlite_source, "audit_workers", lambda cores=cores: cores)
        source = SqliteSource(path, table_t_spec(), arrow_read=True)
        try:
            bounds = source.plan_partitions()
            source.audit_values(bounds, None)
            assert source.concurrent_reads(bounds) == reads
        finally:
            source.close()


def test_partitions_read_at_once_on_one_source_give_the_chunks_read_one_after_the_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sqlite_arrow_driver.READS_SETTING, "2")
    path = tmp_path / "s.sqlite"
    _write(path, [(i, _day(i), i, i / 4, i * 2.5, "2026-10-01 00:00:00", f"c{i}") for i in range(1, 401)])
    alone, proven = _read(path, arrow=True)
    assert proven
    source = SqliteSource(path, table_t_spec(), arrow_read=True)
    try:
        bounds = source.plan_partitions()
        source.audit_values(bounds, None)
        assert source.concurrent_reads(bounds) == 2
        with ThreadPoolExecutor(max_workers=2) as pool:
            together = pool.map(lambda b: list(source.read(f"p-{b.label}", b, 5)), bounds)
            chunks = [chunk for part in together for chunk in part]
        # each read had a driver connection of its own and gave it back: never more than two were opened
        assert 1 <= len(source._arrow_idle) <= 2
    finally:
        source.close()
    assert_same_chunks(chunks, alone)


def test_the_switch_keeps_every_read_on_the_row_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sqlite_arrow_driver.SWITCH, "0")
    path = tmp_path / "s.sqlite"
    _small_table(path)
    assert not _proven_by_default(path)


def test_invalid_utf8_text_is_refused_by_the_audit_and_by_the_read_itself(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _write(path, [(i, _day(0), 1, 1.5, 2.25, "2026-10-01 00:00:00", "x") for i in range(1, 9)])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE t SET note = CAST(x'41ff42' AS TEXT) WHERE id = 5")
    conn.close()
    for arrow in (True, False):  # before arming: the audit names the column
        with pytest.raises(DponeError) as caught:
            _read(path, arrow=arrow)
        assert caught.value.code is ErrorCode.MANIFEST_INVALID
        assert (caught.value.details["column"], caught.value.details["reason"]) == ("note", "not_utf8_text")
    source = SqliteSource(path, table_t_spec(), arrow_read=True)  # the read, unaudited, is the last line
    try:
        bound = source.plan_partitions()[0]
        with pytest.raises(DponeError) as caught:
            list(source.read("p", bound, 5))
        assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
    finally:
        source.close()


def _plan() -> sqlite_arrow.ArrowPlan:
    from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

    schema = TableSchema(columns=(ColumnSpec(name="a", clickhouse_type="Int64"),))
    plan = sqlite_arrow.arrow_plan(schema, lambda column: True, {})
    assert plan is not None
    return plan


def _batch(markers: list[int], values: list[int]) -> pa.RecordBatch:
    return pa.record_batch([pa.array(markers, pa.int64()), pa.array(values, pa.int64())], names=["m", "a"])


@pytest.mark.parametrize(
    "batches",
    [
        [_batch([1, 1], [1, 2])],  # the literal row missing
        [_batch([0, 1], [0, 1]), _batch([0, 1], [0, 2])],  # a second literal row
        [],  # nothing at all
        [pa.record_batch([pa.array([0, 1]), pa.array([0.0, 1.0])], names=["m", "a"])],  # another type
    ],
    ids=["no-literal-row", "literal-row-twice", "empty", "wrong-type"],
)
def test_batches_that_do_not_prove_the_literal_row_fail_the_read(batches: list[pa.RecordBatch]) -> None:
    with pytest.raises(sqlite_arrow.ArrowReadBroken):
        list(_plan().chunks(iter(batches), "p", 10))


def test_chunks_hold_chunk_rows_across_batches_without_the_literal_row() -> None:
    batches = [_batch([0, 1, 1], [0, 1, 2]), _batch([1, 1, 1], [3, 4, 5]), _batch([1], [6])]
    chunks = list(_plan().chunks(iter(batches), "p", 4))
    assert [list(c.columns[0]) for c in chunks] == [[1, 2, 3, 4], [5, 6]]


def test_a_driver_that_does_not_load_keeps_the_row_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    real = importlib.import_module

    def broken(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("adbc_driver_sqlite"):
            raise ImportError("its native library is missing")
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    sqlite_arrow_driver._loads.cache_clear()
    monkeypatch.setattr(importlib, "import_module", broken)
    try:
        path = tmp_path / "s.sqlite"
        _small_table(path)
        assert not _proven_by_default(path)
    finally:
        sqlite_arrow_driver._loads.cache_clear()


def _commit_in_another_process(path: Path, row: tuple[object, ...]) -> None:
    """A writer of its own process, as a production writer is: it checkpoints the WAL when it takes itself
    for the file's last connection."""
    code = (
        "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); "
        f"db.execute('INSERT INTO t VALUES ({', '.join('?' * len(NAMES))})', {row!r}); db.commit(); db.close()"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)


def test_a_read_stopped_midway_leaves_the_row_connection_seeing_new_commits(tmp_path: Path) -> None:
    # Python's sqlite3 and the driver's own SQLite share the process: closing a driver connection dropped
    # the process's locks on the file, a writer process then checkpointed and deleted the WAL under the
    # source's sqlite3 connection, which kept reading the deleted WAL (a later commit stayed invisible)
    path = tmp_path / "s.sqlite"
    _small_table(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    source = SqliteSource(path, table_t_spec(), arrow_read=True)
    try:
        bounds = source.plan_partitions()
        source.audit_values(bounds, None)
        before = sum(source.count_partitions(bounds))
        stream = source.read("p", bounds[0], 1)
        next(stream)
        stream.close()  # a read stopped midway: its connection is not reused
        _commit_in_another_process(path, (101, _day(1), 1, 1.5, 2.25, "2026-10-01 00:00:00", "x"))
        assert sum(source.count_partitions(bounds)) == before + 1
        _commit_in_another_process(path, (102, _day(1), 1, 1.5, 2.25, "2026-10-01 00:00:00", "x"))
        assert sum(source.count_partitions(bounds)) == before + 2, "it read a WAL a writer deleted"
    finally:
        source.close()
