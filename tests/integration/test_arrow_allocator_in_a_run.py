"""``dpone run`` allocates Arrow buffers from the system allocator (adapters/arrow_memory.py) unless the
user named a pool: real chDB target, SQLite source, in process, so Arrow's default pool can be read after."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from airflow_provider_dpone.adapters.arrow_memory import POOL_SETTING
from tests.integration.route_rig import (
    dpone,
    source_rows,
    target_rows,
    write_manifest,
)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("named", "pool"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_a_run_moves_its_rows_from_the_system_allocator_unless_a_pool_was_named(
    base: Path,
    store_url: str,
    mimalloc_pool: None,
    monkeypatch: pytest.MonkeyPatch,
    named: str | None,
    pool: str,
) -> None:
    if named is None:
        monkeypatch.delenv(POOL_SETTING, raising=False)
    else:
        monkeypatch.setenv(POOL_SETTING, named)
    manifest = write_manifest(base, "orders", store_url)

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert pa.default_memory_pool().backend_name == pool
    assert target_rows(base) == source_rows(base)
