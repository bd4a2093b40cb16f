"""A run's Arrow buffers come from the system allocator unless the user named Arrow's pool."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_provider_dpone.adapters.arrow_memory import POOL_SETTING, use_system_allocator


def test_the_system_allocator_becomes_arrows_default_pool(mimalloc_pool: None) -> None:
    assert use_system_allocator({}) is True
    assert pa.default_memory_pool().backend_name == "system"
    assert pa.array([1, 2, 3]).buffers()[1] is not None  # allocations still work


@pytest.mark.parametrize("named", ["mimalloc", "jemalloc", "system"])
def test_a_pool_the_user_named_is_left_alone(mimalloc_pool: None, named: str) -> None:
    assert use_system_allocator({POOL_SETTING: named}) is False
    assert pa.default_memory_pool().backend_name == "mimalloc"


def test_buffers_of_the_old_pool_outlive_the_switch(mimalloc_pool: None) -> None:
    kept = pa.array(list(range(100_000)))
    use_system_allocator({})
    fresh = pa.array(list(range(100_000)))
    assert kept.equals(fresh)
    del kept  # freed to mimalloc, where it came from
    assert pa.default_memory_pool().backend_name == "system"
