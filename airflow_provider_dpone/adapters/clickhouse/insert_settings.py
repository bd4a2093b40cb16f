"""Inserts the engine must not drop: a deduplication token of their own, asynchronous inserts off.

ClickHouse drops an inserted block whose content hash matches a recent block of the table: by default for
``Replicated*MergeTree``, and for a plain ``MergeTree`` created with ``non_replicated_deduplication_window``.
dpone's guard already keeps a partition from being written twice, so deduplication by content could only
drop rows dpone means to write. Seen: ``replace_partition`` with a ``lookback`` deletes the last days and
inserts them again; when they did not change, the blocks are the very blocks of the previous run, the
engine discarded them, and the days were gone while the run reported them loaded (exit 0).

Deduplication still has one use: the driver re-sends an insert whose connection the server closed
(clickhouse-connect rebuilds the body and retries once), and a request the server had applied must not
land twice. So each insert request carries an ``insert_deduplication_token`` of its own (a fresh random
value): the engine then deduplicates by that token only — a re-sent request is absorbed, a later insert
of the same rows never is. An engine without tokens (before 22.2; the 18.16 server) gets
``insert_deduplicate = 0`` instead: nothing is dropped, and a re-sent request is not absorbed there.

An asynchronous insert (``async_insert`` without waiting) returns before the rows are written, so a
checkpoint would be committed for rows that may never arrive: ``async_insert = 0`` where the engine knows
it. A target table declared by hand with a fine partition key (``PARTITION BY day``) refuses a block
that touches more than ``max_partitions_per_insert_block`` (100) of its partitions: a load of many small
days (merged into blocks) or a staged copy of them failed inside the guarded call, leaving the route
blocked with part of the rows written. The limit is lifted (``0``) on dpone's inserts where the engine
knows it: the rows land in the parts the table's own partitioning makes, as many as one insert per day
would make. A server that does not let the connection's user set these is found before arming by
:func:`require_plain_inserts`, never by an insert inside the guarded call.
"""

from __future__ import annotations

import uuid
from typing import Any

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

TOKEN = "insert_deduplication_token"
#: the engine's limit of target partitions one insert block may touch (100 by default; 18.16 has none)
PARTITIONS_PER_BLOCK = "max_partitions_per_insert_block"
TOKEN_PREFIX = "dpone-"


def plain_insert_settings(client: Client) -> dict[str, Any]:
    """The settings of one insert request: call once per request (the token must not be reused)."""
    known = client.server_settings
    settings: dict[str, Any] = {}
    if TOKEN in known:
        settings[TOKEN] = TOKEN_PREFIX + uuid.uuid4().hex
    else:
        settings["insert_deduplicate"] = 0
    if "async_insert" in known:
        settings["async_insert"] = 0
    if PARTITIONS_PER_BLOCK in known:
        settings[PARTITIONS_PER_BLOCK] = 0
    return settings


def require_plain_inserts(client: Client, endpoint: EndpointDescriptor, table: str) -> None:
    """Read-only, before arming: the engine accepts the settings every insert will carry.

    A probe query carries them: a setting the user may not change (a settings-profile constraint, a
    read-only setting) is refused here, so it stops the run before any checkpoint or target write.
    """
    settings = plain_insert_settings(client)
    if TOKEN not in settings and "insert_deduplicate" not in client.server_settings:
        # every ClickHouse release since 2017 has one or the other: an engine without either is not one
        # dpone can keep from deduplicating its inserts
        raise DponeError(
            ErrorCode.TARGET_INCOMPATIBLE,
            f"{endpoint.describe()} reports neither {TOKEN} nor insert_deduplicate: dpone cannot keep "
            "the engine from dropping inserted rows it takes for repeats",
            details={"table": table, "step": "prepare", "settings": [TOKEN, "insert_deduplicate"]},
        )
    try:
        client.command("SELECT 1", settings=settings)
    except OperationalError:
        raise  # transport: the caller maps it to target_unreachable
    except Exception as exc:
        names = ", ".join(settings)
        raise DponeError(
            ErrorCode.TARGET_INCOMPATIBLE,
            f"the ClickHouse user of {endpoint.describe()} may not set what dpone sends with every insert "
            f"({names}): without it the engine may drop or defer rows dpone writes. Allow these settings in "
            "the user's settings profile (no constraint, not read-only), then run again",
            details={"table": table, "step": "prepare", "settings": list(settings)},
        ) from exc
