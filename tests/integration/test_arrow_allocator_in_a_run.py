"""``dpone run`` allocates Arrow buffers from the system allocator (adapters/arrow_memory.py): real chDB
target, SQLite source, in process, so Arrow's default pool can be read after the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_provider_dpone.adapters.arrow_memory import POOL_SETTING
from tests.integration.test_route_spelling import (  # noqa: F401  (fixtures)
    base,
    dpone,
    source_rows,
    store_url,
    target_rows,
    write_manifest,
)


@pytest.fixture
def mimalloc_pool() -> Iterator[None]:
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    yield
    pa.set_memory_pool(before)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_run_moves_its_rows_with_the_system_allocator(
    base: Path,  # noqa: F811
    store_url: str,  # noqa: F811
    mimalloc_pool: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(POOL_SETTING, raising=False)
    manifest = write_manifest(base, "orders", store_url)

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert pa.default_memory_pool().backend_name == "system"
    assert target_rows(base) == source_rows(base)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_run_keeps_the_pool_the_user_named(
    base: Path,  # noqa: F811
    store_url: str,  # noqa: F811
    mimalloc_pool: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(POOL_SETTING, "mimalloc")
    manifest = write_manifest(base, "orders", store_url)

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert pa.default_memory_pool().backend_name == "mimalloc"
    assert target_rows(base) == source_rows(base)
