"""What dpone sent to change a target and the server may still be running, found before anyone decides.

A statement does not stop when its client does. A run killed (SIGKILL, a lost worker) or timed out on the
client while the server was still copying a staging table into the target (``INSERT ... SELECT``), or
still reading an insert's body, leaves the statement running: the guard records the outcome as unknown,
an operator counts the target, finds none of the attempt's rows yet, resolves ``not-applied``, the next
run loads the partitions again, and then the orphaned statement lands its rows too. Seen on the 18.16
server: every row of a staged publish twice, every command exit 0.

So every statement dpone sends under a target permit (truncate, delete, insert, publish, attach) carries a
``query_id`` that names the target table (:func:`tagged`), a delete's condition carries the same tag as a
constant (``AND '<tag>' != ''``: a mutation outlives its statement, and ``system.mutations`` keeps its
command, not its query ID), and ``guard resolve`` asks the server first (:func:`in_flight`) whether any such
statement is still running, or such a mutation still pending, and refuses while one is (the rows it writes
or deletes are not counted yet). Other writers' mutations are not dpone's to wait for there; a deleting
run counts them all before arming (:func:`pending_mutations`: mutations run in order). The server's own
``system.processes`` and ``system.mutations`` answer; a replicated target behind a load balancer may be
answered by a replica that did not run the statement.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string

#: every tag starts so: ``dpone-<16 hex of the table's digest>-``, then 32 hex per statement
_PREFIX = "dpone-"


def target_tag(name: TableName) -> str:
    """The ``query_id`` prefix of every statement that changes ``name`` (hex and dashes: no LIKE wildcard)."""
    return f"{_PREFIX}{hashlib.sha256(str(name).encode('utf-8')).hexdigest()[:16]}-"


def tagged(settings: dict[str, Any] | None, tag: str | None) -> dict[str, Any]:
    """``settings`` plus a ``query_id`` of its own under ``tag`` (unchanged without one)."""
    merged = dict(settings or {})
    if tag is not None:
        merged["query_id"] = tag + uuid.uuid4().hex
    return merged


def delete_marker(tag: str | None) -> str:
    """The constant a delete's condition carries so its mutation can be found (empty without a tag)."""
    return "" if tag is None else f" AND {quote_string(tag)} != ''"


@dataclass(frozen=True)
class InFlight:
    """What may still change the target's rows: dpone's own statements running, its mutations pending."""

    statements: int
    mutations: int

    @property
    def any(self) -> bool:
        return self.statements > 0 or self.mutations > 0


def in_flight(client: Client, name: TableName) -> InFlight:
    """Read-only: dpone's statements on ``name`` the server is still running, and its pending mutations."""
    tag = target_tag(name)
    statements = client.query(
        f"SELECT count() FROM system.processes WHERE query_id LIKE {quote_string(tag + '%')}"
    ).result_rows[0][0]
    return InFlight(statements=int(statements), mutations=pending_mutations(client, name, own=True))


def pending_mutations(client: Client, name: TableName, *, own: bool = False) -> int:
    """Read-only: mutations of ``name`` not done yet; ``own``: only those of dpone's deletes."""
    mine = f" AND position(command, {quote_string(target_tag(name))}) > 0" if own else ""
    count = client.query(
        "SELECT count() FROM system.mutations WHERE database = "
        f"{quote_string(name.database)} AND table = {quote_string(name.table)} AND is_done = 0{mine}"
    ).result_rows[0][0]
    return int(count)
