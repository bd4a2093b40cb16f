"""The pre-arm value audit reads groups of partitions on several connections at once (issue 16).

SQLite evaluates the audit's per-row checks in C with the GIL released, so the groups' range scans run on
as many cores. What must not change is the verdict: the same refusal (column, reason, every count) as one
connection reading every partition, and a clean table stays clean. Real SQLite files throughout.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import value_audit
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource, audit_workers
from airflow_provider_dpone.contracts.errors import DponeError
from tests.builders import day
from tests.integration.sqlite_audit_rig import BAD_CELLS, DAYS, FIRST, PER_DAY, orders_spec, spoilable_orders


def _verdict(path: Path, connections: int, first: int = 0, last: int = DAYS) -> dict[str, Any] | None:
    """The audit's outcome over days [first, last): None when clean, else the refusal's public parts."""
    # the SQL audit itself (the Arrow audit proves clean runs first: tests/integration/test_sqlite_arrow_audit.py)
    source = SqliteSource(path, orders_spec(), audit_connections=connections, arrow_read=False)
    try:
        bounds = source.plan_partitions()[first:last]
        try:
            source.audit_values(bounds, None)
        except DponeError as exc:
            return {"code": exc.code, "message": str(exc), "details": exc.details, "hints": exc.hint_lines}
        return None
    finally:
        source.close()


@contextlib.contextmanager
def _audit_statements_meet() -> Iterator[list[tuple[int, bool]]]:
    """Every new SQLite connection records, for each audit statement it starts, (thread, whether a second
    audit statement was running at the same time): each statement waits up to 5 s for a partner."""
    meetings: list[tuple[int, bool]] = []
    barrier = threading.Barrier(2, timeout=5)
    real_connect = sqlite3.connect

    def traced(sql: str) -> None:
        if "dpone_c0" not in sql or not sql.lstrip().upper().startswith("SELECT"):
            return
        try:
            barrier.wait()
            met = True
        except threading.BrokenBarrierError:
            met = False
        meetings.append((threading.get_ident(), met))

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = real_connect(*args, **kwargs)
        connection.set_trace_callback(traced)
        return connection

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", connect)
        yield meetings


def test_two_groups_of_partitions_are_audited_at_the_same_time_on_two_threads(tmp_path: Path) -> None:
    path = tmp_path / "orders.sqlite"
    spoilable_orders(path)
    with _audit_statements_meet() as meetings:
        assert _verdict(path, connections=2) is None
    assert len(meetings) == 2, meetings
    assert all(met for _, met in meetings), "the two audit statements did not run at the same time"
    assert len({thread for thread, _ in meetings}) == 2


def test_one_connection_audits_its_statements_one_after_the_other(tmp_path: Path) -> None:
    path = tmp_path / "orders.sqlite"
    spoilable_orders(path)
    with _audit_statements_meet() as meetings:
        assert _verdict(path, connections=1) is None
    assert meetings == [(threading.get_ident(), False)]


def test_the_groups_cover_every_partition_once_and_stay_range_scans() -> None:
    days = [
        day((FIRST + timedelta(days=d)).isoformat(), (FIRST + timedelta(days=d + 1)).isoformat())
        for d in range(7)
    ]
    assert [(b.lower, b.upper) for b in value_audit.audit_runs(days, 1)] == [("2026-11-01", "2026-11-08")]
    assert [(b.lower, b.upper) for b in value_audit.audit_runs(days, 2)] == [
        ("2026-11-01", "2026-11-05"),
        ("2026-11-05", "2026-11-08"),
    ]
    assert len(value_audit.audit_runs(days, 4)) == 4
    assert len(value_audit.audit_runs(days, 9)) == 7  # never more statements than partitions
    assert value_audit.audit_runs([], 2) == []
    gapped = [*days[:2], *days[3:]]  # a gap still splits a group
    assert [(b.lower, b.upper) for b in value_audit.audit_runs(gapped, 2)] == [
        ("2026-11-01", "2026-11-03"),
        ("2026-11-04", "2026-11-05"),
        ("2026-11-05", "2026-11-08"),
    ]
    with pytest.raises(ValueError):
        value_audit.audit_runs(days, 0)


def test_the_default_uses_the_cores_this_process_may_run_on_at_most_four() -> None:
    assert 1 <= audit_workers() <= 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spoiled=st.dictionaries(
        st.integers(min_value=0, max_value=PER_DAY * DAYS - 1), st.sampled_from(BAD_CELLS), max_size=4
    ),
    connections=st.integers(min_value=2, max_value=5),
    window=st.tuples(st.integers(min_value=0, max_value=DAYS - 1), st.integers(min_value=1, max_value=DAYS)),
)
def test_several_connections_give_exactly_the_verdict_of_one(
    spoiled: dict[int, tuple[str, str]], connections: int, window: tuple[int, int]
) -> None:
    first, last = min(window), max(max(window), min(window) + 1)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "orders.sqlite"
        spoilable_orders(path, spoiled)
        one = _verdict(path, 1, first, last)
        several = _verdict(path, connections, first, last)
    assert several == one


def test_a_refusal_counts_the_rows_of_both_groups_and_lists_every_column(tmp_path: Path) -> None:
    path = tmp_path / "orders.sqlite"
    # one bad amount in the first half of the days, two in the second, and a sub-second time in the second
    spoilable_orders(
        path,
        {
            3: ("amount", "'x'"),
            150: ("amount", "'y'"),
            190: ("amount", "1.005"),
            160: ("updated_at", "'2026-11-07 10:00:00.5'"),
        },
    )
    verdict = _verdict(path, connections=2)
    assert verdict is not None
    assert verdict["details"]["column"] == "amount" and verdict["details"]["rows"] == 3
    assert verdict["details"]["also"] == [{"column": "updated_at", "reason": "sub_second_digits"}]
    assert verdict == _verdict(path, connections=1)
