"""Inserts the engine must not drop: block deduplication and asynchronous inserts off for dpone's writes.

ClickHouse drops an inserted block whose content hash matches a recent block of the table: always for
``Replicated*MergeTree`` (``replicated_deduplication_window``), and for a plain ``MergeTree`` created with
``non_replicated_deduplication_window``. dpone's guard already keeps a partition from being written twice;
the engine's deduplication can only drop rows dpone means to write. Seen: ``replace_partition`` with a
``lookback`` deletes the last days and inserts them again; when they did not change, the blocks are the
very blocks of the previous run, the engine discards them, and the days are gone while the run reports
them loaded (exit 0). An asynchronous insert (``async_insert`` without waiting) returns before the rows are
written, so a checkpoint would be committed for rows that may never arrive.

So every insert dpone sends (direct, staging, the staging -> target copy) carries the settings below that
the engine knows: ``insert_deduplicate`` (every release), ``deduplicate_insert`` and
``deduplicate_insert_select`` (current releases, where they supersede it), ``async_insert`` (20.x on). A
server that does not let the connection's user change them (a settings-profile constraint) is found before
arming by :func:`require_plain_inserts`, never by an insert inside the guarded call.
"""

from __future__ import annotations

from typing import Any

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: (setting, value) in the order they are sent; a setting the engine does not know is not sent.
PLAIN_INSERT_SETTINGS: tuple[tuple[str, Any], ...] = (
    ("insert_deduplicate", 0),
    ("deduplicate_insert", "disable"),
    ("deduplicate_insert_select", "disable"),
    ("async_insert", 0),
)


def plain_insert_settings(client: Client) -> dict[str, Any]:
    """The settings of :data:`PLAIN_INSERT_SETTINGS` this client's engine knows."""
    known = client.server_settings
    return {name: value for name, value in PLAIN_INSERT_SETTINGS if name in known}


def require_plain_inserts(client: Client, endpoint: EndpointDescriptor, table: str) -> None:
    """Read-only, before arming: the engine accepts the settings every insert will carry.

    A probe query carries them: a setting the user may not change (a settings-profile constraint, a
    read-only setting) is refused here, so it stops the run before any checkpoint or target write.
    """
    settings = plain_insert_settings(client)
    if "insert_deduplicate" not in settings:
        # every ClickHouse release since 2017 has it: a server without it is not one dpone can trust
        raise DponeError(
            ErrorCode.TARGET_INCOMPATIBLE,
            f"{endpoint.describe()} does not report the setting insert_deduplicate: dpone cannot turn off "
            "the engine's insert deduplication, which may drop rows it writes",
            details={"table": table, "step": "prepare", "setting": "insert_deduplicate"},
        )
    try:
        client.command("SELECT 1", settings=settings)
    except OperationalError:
        raise  # transport: the caller maps it to target_unreachable
    except Exception as exc:
        names = ", ".join(settings)
        raise DponeError(
            ErrorCode.TARGET_INCOMPATIBLE,
            f"the ClickHouse user of {endpoint.describe()} may not change the settings dpone sends with "
            f"every insert ({names}): without them the engine may drop or defer rows dpone writes. Allow "
            "them in the user's settings profile (no constraint or readonly on them), then run again",
            details={"table": table, "step": "prepare", "settings": list(settings)},
        ) from exc
