"""Who holds a route's lease, read without taking it: what ``route_status`` reports as "busy".

Taking the lease to test it (even a shared ``flock`` for a moment) could make a starting run fail as busy,
so the probe only looks:

* PostgreSQL: ``pg_locks`` joined to ``pg_stat_activity`` for the route's advisory lock (granted), which
  names the holder's backend; the holder sets its lease session's ``application_name`` to
  ``dpone lease host=<host> pid=<pid>`` (see ``route_lease.postgres_lease``).
* SQLite: the kernel's lock table (``/proc/locks``, Linux) for an exclusive ``flock`` on the lease file;
  the holder writes ``host=<host> pid=<pid> since=<UTC>`` into that file once it holds it. Without
  ``/proc/locks`` (not Linux) the probe cannot tell and reports nobody.

Facts only: host name, process id, since when; never the store's URL, credentials or SQL.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import URL, create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from airflow_provider_dpone.adapters.checkpoint_sql.route_lease import (
    lease_file,
    lock_id,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

_FIELD = re.compile(r"\b(host|pid|since)=(\S{1,200})")
PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True)
class LeaseHolder:
    """The process holding a route's lease (what on-call needs to find it)."""

    host: str | None
    pid: int | None
    since: str | None

    def describe(self) -> str:
        where = f"host {self.host or 'unknown'}, pid {self.pid if self.pid is not None else 'unknown'}"
        return where + (f", since {self.since}" if self.since else "")

    def as_json(self) -> dict[str, object]:
        return {"host": self.host, "pid": self.pid, "since": self.since}


def _parsed(label: str) -> dict[str, str]:
    return {key: value for key, value in _FIELD.findall(label)}


def _holder(fields: dict[str, str], *, pid: int | None = None, since: str | None = None) -> LeaseHolder:
    raw_pid = fields.get("pid")
    return LeaseHolder(
        host=fields.get("host"),
        pid=int(raw_pid) if raw_pid and raw_pid.isdigit() else pid,
        since=fields.get("since") or since,
    )


def lease_holder(url: URL, key: str) -> LeaseHolder | None:
    """The holder of lease ``key`` in the store at ``url``, or None when nobody holds it."""
    if url.get_backend_name() == "postgresql":
        return _postgres_holder(url, key)
    if not url.database or url.database == ":memory:":
        return None
    return sqlite_holder(lease_file(Path(url.database), key))


def _postgres_holder(url: URL, key: str) -> LeaseHolder | None:
    lock = lock_id(key)
    classid, objid = (lock >> 32) & 0xFFFFFFFF, lock & 0xFFFFFFFF
    engine = create_engine(url, poolclass=None)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT a.application_name, a.client_hostname, host(a.client_addr), "
                    "to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
                    "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = :c AND l.objid = :o "
                    "AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database "
                    "WHERE datname = current_database()) LIMIT 1"
                ),
                {"c": classid, "o": objid},
            ).first()
    except SQLAlchemyError as exc:
        raise DponeError(
            ErrorCode.CHECKPOINT_STORE_FAILED,
            "checkpoint store operation lease_holder failed on postgresql",
            details={
                "operation": "lease_holder",
                "backend": "postgresql",
                "driver_error": type(exc).__name__,
            },
        ) from exc
    finally:
        engine.dispose()
    if row is None:
        return None
    app, client_host, client_addr, started = row
    fields = _parsed(app or "")
    if "host" not in fields and (client_host or client_addr):
        fields["host"] = str(client_host or client_addr)
    return _holder(fields, since=started)


def sqlite_holder(path: Path) -> LeaseHolder | None:
    """The holder of the ``flock`` on ``path`` per ``/proc/locks``; None if unlocked or unknowable."""
    try:
        stat = os.stat(path)
        table = PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    pid: int | None = None
    for line in table.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 29942 fe:00:3096754 0 EOF" ("->" marks a waiter: not a holder)
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[3] == "WRITE" and parts[5] == device:
            pid = int(parts[4]) if parts[4].isdigit() else None
            break
    else:
        return None
    try:
        label = path.read_text(encoding="utf-8", errors="replace")[:512]
    except OSError:
        label = ""
    return _holder(_parsed(label), pid=pid)
