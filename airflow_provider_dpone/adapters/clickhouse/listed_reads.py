"""Reads of one aggregate row (a count, a list beside its ``count()``), so that a cut answer raises.

Behind an HTTP proxy that speaks HTTP/1.0 to the server (nginx's default), an answer cut right after its
headers arrives whole and empty, and clickhouse-connect reads an empty body as no rows: a listing whose
"none" lets a run go on (no detached part, no mutation of its own, no long-name setting) failed open after
one lost answer (ADR 0094, addendum). One row whatever the list holds, and a list as long as its count,
or :class:`OperationalError` (a transport failure: the run stops, retryably).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError


def listed(client: Client, aggregate: str, source: str = "a system table") -> list[Any]:
    """The list ``SELECT count(), <aggregate>`` reads (``aggregate``: ``groupArray(...) FROM ... WHERE ...``);
    ``source`` names the table read in the error."""
    rows = client.query(f"SELECT count(), {aggregate}").result_rows
    if len(rows) != 1 or int(rows[0][0]) != len(rows[0][1]):
        raise OperationalError(f"{source} answered no row, or a list other than its count")
    return list(rows[0][1])


def one_row(client: Client, statement: str, source: str) -> Sequence[Any]:
    """The one row of an aggregate ``statement``, or :class:`OperationalError`: an answer cut to nothing is
    "could not be read", never "none" (``source`` names what was read)."""
    rows = client.query(statement).result_rows
    if len(rows) != 1:
        raise OperationalError(f"{source} answered {len(rows)} rows where one aggregate row was asked")
    return rows[0]
