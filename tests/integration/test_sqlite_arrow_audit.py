"""The Arrow audit proves clean runs only: its verdict is always the SQL audit's, and a bad value is never
proven clean (real SQLite files, both audits, the same partitions)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import textwrap
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import sqlite_arrow_driver, sqlite_source
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.ports.source import ValueLimits
from tests.integration.sqlite_audit_rig import BAD_CELLS, DAYS, PER_DAY, orders_spec, spoilable_orders

# the driver is a dependency: these tests fail, never skip, when it does not load
pytestmark = pytest.mark.usefixtures("_driver_loads")


@pytest.fixture
def _driver_loads() -> None:
    assert sqlite_arrow_driver.wanted(), "adbc-driver-sqlite is a dependency and must load"


#: more ways to spoil a cell than the SQL audit's own differential uses: each is refused, or (marked
#: "fine") accepted by the SQL audit; the Arrow proof takes some of those and leaves the rest to it
MORE_CELLS = (
    ("updated_at", "CAST('2026-11-01 10:00:00' AS BLOB)"),  # a blob the driver would hand over as text
    ("order_date", "20261102"),
    ("customer", "X'FF00'"),
    ("customer", "CAST(X'FF00' AS TEXT)"),  # text that is not UTF-8: the audit no longer reads the strings
    ("qty", "2.5"),
    ("amount", "1e300"),
    ("amount", "12345678901234567"),
    ("updated_at", "'2026-11-01T10:00:00'"),  # fine: ISO with a T
    ("updated_at", "' 2026-11-01 10:00:00'"),  # fine for SQL (trimmed), not proven by Arrow
    ("updated_at", "'2026-11-01 10:00:00+02:00'"),
    ("updated_at", "'2026-02-30 10:00:00'"),
    ("order_date", "'2026-11-31'"),
    ("qty", "NULL"),  # fine
)
CELLS = BAD_CELLS + MORE_CELLS


def _audit(
    path: Path, *, arrow: bool, limits: ValueLimits | None = None
) -> tuple[dict[str, Any] | None, bool]:
    """(the refusal's public parts or None when clean, whether the Arrow audit proved the run)."""
    source = SqliteSource(path, orders_spec(), arrow_read=arrow)
    proofs: list[bool] = []
    original = source._arrow_audit_clean

    def spy(*args: Any) -> bool:
        proofs.append(original(*args))
        return proofs[-1]

    source._arrow_audit_clean = spy  # type: ignore[method-assign]
    try:
        try:
            source.audit_values(source.plan_partitions(), limits)
        except DponeError as exc:
            return {
                "code": exc.code,
                "message": str(exc),
                "details": exc.details,
                "hints": exc.hint_lines,
            }, any(proofs)
        return None, any(proofs)
    finally:
        source.close()


def test_a_clean_table_is_proven_by_the_arrow_audit_alone(tmp_path: Path) -> None:
    path = tmp_path / "orders.sqlite"
    spoilable_orders(path)
    verdict, proven = _audit(path, arrow=True)
    assert verdict is None and proven


@pytest.mark.parametrize("batch_rows", [5, 16_384], ids=["cell-in-a-later-batch", "one-batch"])
@pytest.mark.parametrize(("column", "literal"), CELLS, ids=[f"{c}={v}" for c, v in CELLS])
def test_no_spoiled_cell_is_proven_clean_and_the_verdict_is_the_sql_audits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, column: str, literal: str, batch_rows: int
) -> None:
    # in a later batch the driver's type is already fixed: a blob then arrives as text, an integer or a
    # REAL as an error; in the first batch they change the column's type
    monkeypatch.setattr(sqlite_source, "AUDIT_BATCH_ROWS", batch_rows)
    path = tmp_path / "orders.sqlite"
    spoilable_orders(path, {PER_DAY * 3 + 4: (column, literal)})
    with_arrow, proven = _audit(path, arrow=True)
    sql_only, _ = _audit(path, arrow=False)
    assert with_arrow == sql_only
    if sql_only is not None:
        assert not proven, "a refused cell must leave the verdict to the SQL audit"


def test_a_target_range_narrower_than_the_values_is_left_to_the_sql_audit(tmp_path: Path) -> None:
    path = tmp_path / "orders.sqlite"
    spoilable_orders(path)
    narrow = ValueLimits(
        date_min=date(1970, 1, 1),
        date_max=date(2026, 11, 3),
        datetime_min=datetime(1970, 1, 1),
        datetime_max=datetime(2106, 2, 7, 6, 28, 15),
    )
    with_arrow, proven = _audit(path, arrow=True, limits=narrow)
    sql_only, _ = _audit(path, arrow=False, limits=narrow)
    assert with_arrow is not None and with_arrow == sql_only
    assert with_arrow["details"]["reason"] == "outside_target_range"
    assert not proven


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spoiled=st.dictionaries(
        st.integers(min_value=0, max_value=PER_DAY * DAYS - 1), st.sampled_from(CELLS), max_size=3
    )
)
def test_the_verdict_with_the_arrow_audit_is_exactly_the_sql_audits(
    spoiled: dict[int, tuple[str, str]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "orders.sqlite"
        spoilable_orders(path, spoiled)
        with_arrow, proven = _audit(path, arrow=True)
        sql_only, _ = _audit(path, arrow=False)
    assert with_arrow == sql_only
    if proven:
        assert sql_only is None


_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
    from tests.integration.sqlite_audit_rig import orders_spec
    source = SqliteSource(Path(sys.argv[1]), orders_spec())
    bounds = source.plan_partitions()
    source.audit_values(bounds, None)
    assert source._arrow_proven is not None
    print(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
    """
)


def _child_peak_kb(path: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], check=True, capture_output=True, text=True, cwd=Path.cwd()
    )
    return int(out.stdout.strip().splitlines()[-1])


def test_the_arrow_audit_holds_no_more_at_five_times_the_rows(tmp_path: Path) -> None:
    # the audit streams the driver's batches: reading a whole group at once would hold ~40 bytes a row
    from tests.integration.sqlite_audit_rig import many_orders

    small, large = tmp_path / "small.sqlite", tmp_path / "large.sqlite"
    many_orders(small, 200_000)
    many_orders(large, 1_000_000)
    with contextlib.suppress(Exception):
        _child_peak_kb(small)  # warm the file cache and imports alike
    small_kb, large_kb = _child_peak_kb(small), _child_peak_kb(large)
    assert large_kb - small_kb < 8_000, (small_kb, large_kb)


def test_the_arrow_audit_counts_every_partition_of_the_run(tmp_path: Path) -> None:
    # a bad cell on the last day only: a proof that read fewer partitions would call the run clean
    path = tmp_path / "orders.sqlite"
    spoilable_orders(path, {PER_DAY * DAYS - 1: ("amount", "1.005")})
    with_arrow, proven = _audit(path, arrow=True)
    assert with_arrow is not None and not proven
    assert with_arrow["details"]["column"] == "amount"
