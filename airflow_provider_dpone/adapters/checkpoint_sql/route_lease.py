"""The route lease, held where the checkpoints live, so every worker sharing a store sees it.

* PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on a connection kept open for the run.
  The server releases it when that session ends, so a SIGKILLed run never leaves a stale lease.
* SQLite: an exclusive ``flock`` on a lock file beside the store file (``<store>.lease-<digest>``). The
  kernel releases it when the holder's file descriptor closes, which process death always does. The lock
  file itself is left in place (it holds the last holder's host/pid line, see ``lease_holder``): removing
  it would race with the next holder.

A PostgreSQL session can end under a live run: ``idle_session_timeout``, ``pg_terminate_backend``, a
failover, a pooler or firewall dropping the idle connection. The lock ends with it while the run goes on, and
a second run can then take the lease and move the same partitions (seen: both committed every partition,
every row twice). So the lease session lifts the idle limits a database or role may set for it, and the
hold a run gets proves itself on that session (``pg_locks``) before the run arms, again right after arming,
and before each chunk reaches the target; a session that is gone, or one that no longer holds the lock, is
``lease_lost``, and the run then writes no ``failed_before_target`` record (a lost lease mid-load still
leaves ``target_outcome_unknown``: the target was touched). On-call commands prove the lease before each of
their writes. An ``flock`` cannot end while its holder's descriptor is open, so the SQLite hold has nothing
to prove.

A lease is not a fence: it stops a second *dpone* run of the same target while the first is alive; it does
not make the guard an exactly-once protocol, and a writer outside dpone is not excluded.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode


def lease_digest(key: str) -> bytes:
    return hashlib.sha256(("dpone.route_lease.v1|" + key).encode("utf-8")).digest()


def lock_id(key: str) -> int:
    """PostgreSQL's advisory lock key of lease ``key``."""
    return int.from_bytes(lease_digest(key)[:8], "big", signed=True)


def lease_file(store_file: Path, key: str) -> Path:
    """SQLite: the lock file of lease ``key`` beside ``store_file``, its symbolic links resolved: one
    store reached as ``state.sqlite`` and through a link to it is one store, with one lease (seen: two
    runs of one target, each through its own spelling, each took its "own" lease and both appended)."""
    real = Path(os.path.realpath(store_file))
    return real.with_name(f"{real.name}.lease-{lease_digest(key).hex()[:16]}")


def holder_label() -> str:
    """What a holder tells ``lease_holder`` about itself: host, process id, since (no secrets)."""
    since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"dpone lease host={socket.gethostname()[:60] or 'unknown'} pid={os.getpid()} since={since}"


def busy(key: str) -> DponeError:
    return DponeError(
        ErrorCode.ROUTE_BUSY,
        f"another run is writing target table {key}; nothing was read or written, retry later",
        details={"target_table": key},
        hint_lines=(
            f"another dpone run (a second scheduler, a manual run, an Airflow retry still alive) holds the "
            f"lease of {key}. This attempt stopped before any source or target I/O and is safe to retry.",
        ),
    )


def lease_lost(key: str) -> DponeError:
    return DponeError(
        ErrorCode.ROUTE_BUSY,
        f"this run's lease of target table {key} ended before it armed (its checkpoint store session was "
        "closed), so another run may be writing the target; it stopped before arming and wrote no rows to "
        "the target, retry later",
        details={"target_table": key, "problem": "lease_lost"},
        hint_lines=(
            "the lease lives in a PostgreSQL session the run keeps open; the server ended it (an "
            "idle_session_timeout, pg_terminate_backend, a failover, a pooler or firewall closing idle "
            "connections). Exempt dpone's checkpoint connections from such limits. This attempt wrote no "
            "checkpoint after it found the lease gone and is safe to retry.",
        ),
    )


class HeldFlock:
    """The SQLite lease's hold: an ``flock`` lasts as long as its descriptor, so it is always held."""

    def require_held(self) -> None:
        return None


class HeldAdvisoryLock:
    """The PostgreSQL lease's hold: proven on the lease's own session, which must still hold the lock."""

    def __init__(self, conn: Connection, lock: int, key: str) -> None:
        self._conn = conn
        self._key = key
        unsigned = lock & 0xFFFF_FFFF_FFFF_FFFF  # pg_locks shows a bigint key as two unsigned halves
        self._halves = {"high": unsigned >> 32, "low": unsigned & 0xFFFF_FFFF}

    def require_held(self) -> None:
        try:
            held = self._conn.execute(
                text(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND pid = pg_backend_pid() AND objsubid = 1 AND classid::bigint = :high "
                    "AND objid::bigint = :low)"
                ),
                self._halves,
            ).scalar()
            self._conn.commit()
        except SQLAlchemyError:
            held = False
        if not held:
            raise lease_lost(self._key)


#: The lease session stays idle for the whole run, so a database or role default of
#: ``idle_session_timeout`` (PostgreSQL 14+) or ``idle_in_transaction_session_timeout`` ended it under a
#: live run (seen: a 2 s limit and a slow source). Lifted for this session alone, where the server knows them.
_NO_IDLE_LIMITS = text(
    "SELECT set_config(name, '0', false) FROM pg_settings "
    "WHERE name IN ('idle_session_timeout', 'idle_in_transaction_session_timeout')"
)


@contextmanager
def postgres_lease(engine: Engine, key: str) -> Iterator[HeldAdvisoryLock]:
    lock = lock_id(key)
    try:
        conn = engine.connect()
        got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock}).scalar()
        if got:  # for route_status: who holds it (pg_stat_activity shows the session's application_name)
            conn.execute(text("SELECT set_config('application_name', :v, false)"), {"v": holder_label()})
            conn.execute(_NO_IDLE_LIMITS)
        conn.commit()
    except SQLAlchemyError as exc:
        raise DponeError(
            ErrorCode.CHECKPOINT_STORE_FAILED,
            "checkpoint store operation lease failed on postgresql",
            details={"operation": "lease", "backend": "postgresql", "driver_error": type(exc).__name__},
        ) from exc
    with conn:
        if not got:
            raise busy(key)
        try:
            yield HeldAdvisoryLock(conn, lock, key)
        finally:
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock})
                conn.execute(text("SELECT set_config('application_name', '', false)"))
                conn.commit()
            except Exception:
                conn.invalidate()


def require_one_name(store_file: Path) -> None:
    """A SQLite store file with hard links is refused before any lease: SQLite keeps its write-ahead log,
    and this module its lease file, per name, so runs through two names neither saw each other's armed
    records nor excluded each other (seen: both committed every partition, every row twice, exit 0). A
    symbolic link is one name (``lease_file`` resolves it)."""
    try:
        names = os.stat(store_file).st_nlink
    except OSError:
        return  # not there yet: the store creates it with one name
    if names > 1:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"the SQLite checkpoint store file has {names} names (hard links): SQLite keeps its write-ahead "
            "log and dpone its lease per name, so runs through different names would not exclude each other",
            details={"problem": "store_has_hard_links", "names": names},
            hint_lines=(
                "nothing was read or written; keep one name for the store file (remove the other hard links, or "
                "use a symbolic link, which is one store)",
            ),
        )


@contextmanager
def sqlite_lease(store_file: Path, key: str) -> Iterator[HeldFlock]:
    import fcntl

    require_one_name(store_file)
    path = lease_file(store_file, key)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy(key) from None
        try:
            label = holder_label().encode("utf-8")
            os.ftruncate(fd, 0)
            os.pwrite(fd, label, 0)  # for route_status; the lock, not this text, is the lease
        except OSError:
            pass
        try:
            yield HeldFlock()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
