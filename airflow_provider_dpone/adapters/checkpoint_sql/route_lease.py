"""The route lease, held where the checkpoints live, so every worker sharing a store sees it.

* PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on a connection kept open for the run.
  The server releases it when that session ends, so a SIGKILLed run never leaves a stale lease.
* SQLite: an exclusive ``flock`` on a lock file beside the store file (``<store>.lease-<digest>``). The
  kernel releases it when the holder's file descriptor closes, which process death always does. The lock
  file itself is left in place (an empty file): removing it would race with the next holder.

A lease is not a fence: it stops a second *dpone* run of the same target while the first is alive; it does
not make the guard an exactly-once protocol, and a writer outside dpone is not excluded.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode


def lease_digest(key: str) -> bytes:
    return hashlib.sha256(("dpone.route_lease.v1|" + key).encode("utf-8")).digest()


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


@contextmanager
def postgres_lease(engine: Engine, key: str) -> Iterator[None]:
    lock_id = int.from_bytes(lease_digest(key)[:8], "big", signed=True)
    try:
        conn = engine.connect()
        got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_id}).scalar()
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
            yield
        finally:
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_id})
                conn.commit()
            except Exception:
                conn.invalidate()


@contextmanager
def sqlite_lease(store_file: Path, key: str) -> Iterator[None]:
    import fcntl

    path = store_file.with_name(f"{store_file.name}.lease-{lease_digest(key).hex()[:16]}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy(key) from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
