"""A run opens its target once: the pre-arm checks and the publish share one client.

A daily run of the demo (one new day beside committed ones) opened the chDB target three times (the
committed rows counted, the new day's bounds counted, the publish), ~45 ms each, a third of the run.
Black-box on a SQLite source into chDB: the ClickHouse client the sink opens is counted, and every one
opened is closed, also when a pre-arm check stops the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse import sink as sink_module
from tests.integration.route_rig import (
    TARGET,
    add_a_new_day,
    chdb_command,
    dpone,
    source_rows,
    target_rows,
    write_manifest,
)


@dataclass
class _Clients:
    opened: int = 0
    closed: int = 0
    live: list[Any] = field(default_factory=list)


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Clients]:
    """Counts the target clients the sink opens and closes (the real ones, on the real chDB path)."""
    seen = _Clients()
    real_open, real_close = sink_module.open_client, sink_module.close_client

    def counting_open(endpoint: Any) -> Any:
        client = real_open(endpoint)
        seen.opened += 1
        seen.live.append(client)
        return client

    def counting_close(client: Any) -> None:
        if client is not None:
            seen.closed += 1
            seen.live.remove(client)
        real_close(client)

    monkeypatch.setattr(sink_module, "open_client", counting_open)
    monkeypatch.setattr(sink_module, "close_client", counting_close)
    yield seen


def _committed_once(root: Path, url: str, clients: _Clients, strategy: str = "incremental_append") -> Path:
    """The route's manifest after a first run committed the source; the clients counted from here on."""
    manifest = write_manifest(root, "orders", url, strategy=strategy)
    assert dpone("run", str(manifest)).exit_code == 0
    clients.opened = clients.closed = 0
    return manifest


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
def test_a_daily_run_opens_the_target_once_and_closes_it(
    base: Path,
    store_url: str,
    clients: _Clients,
    strategy: str,
) -> None:
    manifest = _committed_once(base, store_url, clients, strategy)
    add_a_new_day(base)

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert "1 partition(s) committed" in result.output
    assert (clients.opened, clients.closed, clients.live) == (1, 1, [])
    assert target_rows(base) == source_rows(base)


def test_a_run_with_nothing_to_move_opens_the_target_once_and_closes_it(
    base: Path,
    store_url: str,
    clients: _Clients,
) -> None:
    manifest = _committed_once(base, store_url, clients)

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert (clients.opened, clients.closed, clients.live) == (1, 1, [])


def test_a_run_a_pre_arm_check_stops_still_closes_its_target(
    base: Path,
    store_url: str,
    clients: _Clients,
) -> None:
    manifest = _committed_once(base, store_url, clients)
    chdb_command(base, f"TRUNCATE TABLE {TARGET}")
    add_a_new_day(base)

    result = dpone("run", str(manifest))

    assert result.exit_code == 3, result.output
    assert "target_lost_committed_rows" in result.output
    assert clients.opened == 1
    assert (clients.closed, clients.live) == (1, [])
