"""A read-only, DB-API-shaped connection to the ClickHouse target, for the hook and common-sql's checks.

``DbApiHook.run`` (and so ``get_records``, ``get_first`` and the SQL check operators) needs a connection
with ``cursor()``/``commit()``/``close()`` and a cursor with ``execute``, ``description`` and the fetch
methods. This module gives exactly that over the one client factory, opened with ``readonly=1``:

* on a server every HTTP request carries ``readonly=1`` (``readonly_pool``), so a change is refused by
  the server itself;
* on embedded chDB the directory is opened only when no other process holds it. The engine keeps an
  exclusive ``flock`` on ``<path>/status`` while any process has it open (the transfer's sink, the reader
  worker); a held lock is refused here with ``native_transfer_route_busy`` before chDB is touched, and a
  directory that does not exist is refused instead of created.

Each statement is checked by ``read_statements`` first, so DDL/DML is refused as
``target_mutation_unguarded`` before it reaches the target. Errors name the connection, never the SQL,
parameters, values or the server's text.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError

from airflow_provider_dpone.adapters.clickhouse.client import close_client, failure_details, open_client
from airflow_provider_dpone.adapters.clickhouse.read_statements import refusal_reason
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: The file an embedded ClickHouse keeps ``flock``-ed while a process has its directory open.
CHDB_STATUS_FILE = "status"
#: ClickHouse's error code for a change refused in readonly mode.
READONLY_SERVER_CODE = 164
_CODE_RE = re.compile(r"\bCode: ([0-9]{1,5})[.,]")

#: A DB-API ``description`` row: name, type code (the ClickHouse type name), then five unknowns.
DescriptionRow = tuple[str, str, None, None, None, None, None]


def refuse_unless_read(sql: str, connection: str) -> None:
    """``target_mutation_unguarded`` unless ``sql`` is one read statement (nothing is opened)."""
    reason = refusal_reason(sql)
    if reason is not None:
        raise DponeError(
            ErrorCode.TARGET_MUTATION_UNGUARDED,
            f"connection {connection!r} serves read-only SQL and refused a statement: {reason}; the "
            "ClickHouse target is written only by NativeTransferOperator under the commit guard's permit",
            details={"connection": connection, "reason": reason},
        )


def chdb_holder_refusal(endpoint: EndpointDescriptor) -> DponeError | None:
    """Why the embedded directory must not be opened now, or ``None`` when no process holds it."""
    path = Path(endpoint.path or "")
    if not endpoint.path or not path.is_dir():
        return DponeError(
            ErrorCode.TARGET_UNREACHABLE,
            f"{endpoint.describe()}: the embedded ClickHouse directory does not exist; a read-only hook "
            "does not create it",
            details={"connection": endpoint.name, "interface": ClickHouseInterface.CHDB.value},
        )
    status = path / CHDB_STATUS_FILE
    if not status.exists():
        return None  # never opened by an engine: nothing can hold it
    fd = os.open(status, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return DponeError(
            ErrorCode.ROUTE_BUSY,
            f"{endpoint.describe()}: another process holds the embedded ClickHouse directory (a running "
            "transfer task or its reader); the hook does not open a held directory",
            details={"connection": endpoint.name, "interface": ClickHouseInterface.CHDB.value},
            hint_lines=(
                "an embedded chDB directory is open in one process at a time: run the check after the "
                "transfer task (downstream of it), or retry later",
            ),
        )
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return None


def open_read_connection(endpoint: EndpointDescriptor) -> ReadOnlyConnection:
    """A read-only connection (caller closes it); a held chDB directory is refused, never opened."""
    if endpoint.interface is ClickHouseInterface.CHDB:
        refusal = chdb_holder_refusal(endpoint)
        if refusal is not None:
            raise refusal
    return ReadOnlyConnection(endpoint, open_client(endpoint, readonly=True))


class ReadOnlyConnection:
    """The DB-API surface ``DbApiHook`` uses; nothing to commit, since nothing is ever written."""

    autocommit = True

    def __init__(self, endpoint: EndpointDescriptor, client: Client) -> None:
        self._endpoint = endpoint
        self._client: Client | None = client

    def cursor(self, *, owns_connection: bool = False) -> ReadOnlyCursor:
        """A cursor; with ``owns_connection`` closing the cursor closes this connection too."""
        if self._client is None:
            raise DponeError(
                ErrorCode.USAGE,
                f"the read-only connection {self._endpoint.name!r} is closed",
                details={"connection": self._endpoint.name},
            )
        return ReadOnlyCursor(self._endpoint, self._client, self if owns_connection else None)

    def commit(self) -> None:
        """Nothing to commit: the connection cannot change the target."""

    def rollback(self) -> None:
        """Nothing to roll back."""

    def close(self) -> None:
        """Release the client (and with it an embedded directory); never raises."""
        client, self._client = self._client, None
        close_client(client)


class ReadOnlyCursor:
    """Runs one read statement at a time and holds its rows for the fetch methods."""

    arraysize = 1

    def __init__(
        self, endpoint: EndpointDescriptor, client: Client, owner: ReadOnlyConnection | None = None
    ) -> None:
        self._endpoint = endpoint
        self._client = client
        self._owner = owner
        self._rows: list[tuple[Any, ...]] = []
        self._next = 0
        self.description: list[DescriptionRow] | None = None
        self.rowcount = -1

    def execute(
        self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> ReadOnlyCursor:
        refuse_unless_read(sql, self._endpoint.name)
        try:
            bound = dict(parameters) if isinstance(parameters, Mapping) else parameters
            result = self._client.query(sql, parameters=bound or None)
        except DponeError:
            raise
        except Exception as exc:
            raise self._failure(exc) from exc
        names = list(result.column_names)
        types = [t.name for t in result.column_types]
        self.description = [(n, t, None, None, None, None, None) for n, t in zip(names, types, strict=True)]
        self._rows = [tuple(row) for row in result.result_rows]
        self._next = 0
        self.rowcount = len(self._rows)
        return self

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> None:
        for parameters in seq_of_parameters:
            self.execute(sql, parameters)

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._next >= len(self._rows):
            return None
        row = self._rows[self._next]
        self._next += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        count = self.arraysize if size is None else size
        rows = self._rows[self._next : self._next + count]
        self._next += len(rows)
        return rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows = self._rows[self._next :]
        self._next = len(self._rows)
        return rows

    def __iter__(self) -> ReadOnlyCursor:
        return self

    def __next__(self) -> tuple[Any, ...]:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def close(self) -> None:
        self._rows = []
        if self._owner is not None:
            self._owner.close()

    def _failure(self, exc: BaseException) -> DponeError:
        details = failure_details(self._endpoint, exc)
        code = details.get("server_code")
        if code is None and (found := _CODE_RE.search(str(exc))):
            code = details["server_code"] = int(found.group(1))  # only the digits of the server's text
        name = self._endpoint.name
        if code == READONLY_SERVER_CODE:
            return DponeError(
                ErrorCode.TARGET_MUTATION_UNGUARDED,
                f"connection {name!r} is read-only (readonly=1): the target refused the statement (a "
                "change, a setting or a table function such as file() or url())",
                details=details,
            )
        if isinstance(exc, OperationalError) and code is None:
            return DponeError(
                ErrorCode.TARGET_UNREACHABLE,
                f"the read-only query on connection {name!r} did not reach the target or got no answer",
                details=details,
            )
        return DponeError(
            ErrorCode.TARGET_QUERY_FAILED,
            f"the target refused the read-only query on connection {name!r}",
            details=details,
        )
