"""Row deletes that finish before the call returns.

``ALTER TABLE ... DELETE`` is an asynchronous mutation. Where the engine has ``mutations_sync`` (current
ClickHouse, chDB) the statement waits for it (value 2: every replica). ClickHouse 18.16 has no such
setting, so the sink polls ``system.mutations`` until no mutation of the table is pending.
"""

from __future__ import annotations

import time
from typing import Any

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName
from airflow_provider_dpone.adapters.clickhouse.statements_in_flight import pending_mutations


class MutationTimeout(TimeoutError):
    """The delete was sent but had not finished when the deadline passed (its outcome is unknown)."""


def delete_where(
    client: Client,
    table: TableName,
    condition: str,
    timeout_s: float,
    settings: dict[str, Any] | None = None,
    marker: str = "",
) -> None:
    """``settings``: the statement's own (a ``query_id``); ``marker``: a constant condition naming the
    target (``statements_in_flight.delete_marker``), so its mutation can be found after the statement."""
    statement = f"ALTER TABLE {table.sql()} DELETE WHERE ({condition}){marker}"
    if "mutations_sync" in client.server_settings:
        client.command(statement, settings={**(settings or {}), "mutations_sync": 2})
        return
    client.command(statement, settings=settings or None)
    await_mutations(client, table, timeout_s)


def await_mutations(client: Client, table: TableName, timeout_s: float) -> None:
    """Poll until no mutation of ``table`` is pending; back off from 50 ms to 1 s between polls (a run
    that deletes found none pending before arming, so these are its own, in order)."""
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while True:
        pending = pending_mutations(client, table)
        if pending == 0:
            return
        if time.monotonic() >= deadline:
            raise MutationTimeout(f"{pending} mutation(s) still pending")
        time.sleep(pause)
        pause = min(pause * 2, 1.0)
