"""Engine construction for the checkpoint store: SQLite (embedded default) or PostgreSQL (shared).

The URL carries a password for PostgreSQL, so it is parsed once here and never kept as text, logged or put
in a message; SQLAlchemy's own ``Engine`` repr masks it.

Every PostgreSQL call is bounded, so a frozen or unreachable server ends a run with
``checkpoint_store_failed`` instead of holding an Airflow worker slot forever:

* ``connect_timeout`` bounds connection establishment (never longer than the statement deadline);
* the server's ``statement_timeout`` cancels a statement that runs too long on a live server;
* TCP keepalives and ``tcp_user_timeout`` end a connection whose peer host or network vanished; the
  server is asked for the same keepalives (``tcp_keepalives_*``), so a session whose client host vanished
  (a worker that lost power or its network mid-run) ends within ~25 s and releases the route lease its
  advisory lock held, instead of at the server's OS default (about 2 h 11 min, every run busy meanwhile);
* a client-side deadline ends a call to a server that accepts bytes but never answers (a SIGSTOPped or
  wedged postmaster: its kernel still acknowledges TCP, so neither of the above fires). When a statement,
  commit or rollback outlives the statement timeout plus :data:`CLIENT_GRACE_S`, the connection's socket
  is shut down; libpq then fails the call at once and the pool discards the connection.

The statement timeout defaults to :data:`POSTGRES_STATEMENT_TIMEOUT_S` and is set with the environment
variable :data:`STATEMENT_TIMEOUT_ENV` (seconds).

Every commit is durable before it returns: SQLite with ``synchronous = FULL``, PostgreSQL sessions with a
lossy ``synchronous_commit`` default raised to ``on`` (``_durable_commits``).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import os
import socket
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: Accepted (backend, driver) pairs. Other drivers are refused rather than half-supported.
SUPPORTED_DRIVERS = {("sqlite", "pysqlite"), ("postgresql", "psycopg2")}
#: Airflow spells PostgreSQL URIs ``postgres://``; SQLAlchemy only knows ``postgresql``.
_BACKEND_ALIASES = {"postgres": "postgresql"}
_DEFAULT_DRIVERS = {"sqlite": "pysqlite", "postgresql": "psycopg2"}
#: How long a SQLite writer waits for another process's write lock before failing.
SQLITE_BUSY_TIMEOUT_S = 30.0
#: Fail fast when PostgreSQL is unreachable instead of hanging an Airflow worker slot.
POSTGRES_CONNECT_TIMEOUT_S = 10
#: Server-side bound of one checkpoint statement (PostgreSQL ``statement_timeout``), in seconds.
POSTGRES_STATEMENT_TIMEOUT_S = 30.0
#: Environment variable overriding :data:`POSTGRES_STATEMENT_TIMEOUT_S` (a number of seconds).
STATEMENT_TIMEOUT_ENV = "DPONE_CHECKPOINT_STATEMENT_TIMEOUT_S"
STATEMENT_TIMEOUT_RANGE_S = (0.1, 3600.0)
#: How much longer than the statement timeout the client waits for a silent server before cutting it off.
CLIENT_GRACE_S = 5.0
#: TCP keepalives: first probe after this idle time, then every interval, dead after count lost probes.
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3


def parse_url(url: str | URL) -> URL:
    """The parsed URL, or ``connection_invalid``. The cause is not chained: parse errors may quote the URL."""
    if isinstance(url, URL):
        parsed = url
    else:
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError):
            raise DponeError(
                ErrorCode.CONNECTION_INVALID, "checkpoint store URL is not a valid URL"
            ) from None
    backend, _, driver = parsed.drivername.partition("+")
    backend = _BACKEND_ALIASES.get(backend, backend)
    driver = driver or _DEFAULT_DRIVERS.get(backend, "")
    if (backend, driver) not in SUPPORTED_DRIVERS:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            "checkpoint store URL must be sqlite (pysqlite) or postgresql (psycopg2)",
            details={"backend": backend, "driver": driver or None},
        )
    return parsed.set(drivername=f"{backend}+{driver}")


_shared_lock = threading.Lock()
#: (URL with its password, statement timeout) -> [weak reference to the engine, users]: the checkpoint,
#: capsule and reader-guard stores of one database share one pool (one run opens all three) instead of
#: three. Weak, so a store dropped without ``close()`` still lets its pool be collected, as before.
_shared: dict[tuple[str, float], list[Any]] = {}


def acquire_store_engine(url: URL) -> Engine:
    """The process's engine for ``url``, created on first use; release it with :func:`release_store_engine`.

    An in-memory SQLite database is never shared: each store of one gets its own, as before."""
    if url.get_backend_name() == "sqlite" and _is_memory(url):
        return create_store_engine(url)
    key = (url.render_as_string(hide_password=False), statement_timeout_s())
    with _shared_lock:
        entry = _shared.get(key)
        engine: Engine | None = entry[0]() if entry is not None else None
        if entry is None or engine is None:
            engine = create_store_engine(url)
            entry = _shared[key] = [weakref.ref(engine), 0]
        entry[1] += 1
        return engine


def release_store_engine(engine: Engine) -> None:
    """One user less; the last one disposes of the pool."""
    with _shared_lock:
        for key, entry in list(_shared.items()):
            held = entry[0]()
            if held is None:
                del _shared[key]  # its users were dropped without close(); the pool went with them
            elif held is engine:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _shared[key]
    engine.dispose()


def create_store_engine(url: URL) -> Engine:
    """A pooled engine: connections and compiled statements are reused across writes."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    engine = create_engine(
        url,
        hide_parameters=True,  # error text in task logs never carries bound values (bounds are source data)
        pool_pre_ping=True,
        connect_args=postgres_connect_args(url.query, statement_timeout_s()),
    )
    event.listen(engine, "connect", _durable_commits)
    return engine


#: ``synchronous_commit`` values under which a commit can be acknowledged and then lost: ``off`` (a server
#: crash loses the last commits), ``local`` (a failover to a synchronous standby loses them).
_LOSSY_COMMITS = frozenset({"off", "local"})


def _durable_commits(dbapi_connection: Any, _record: Any) -> None:
    """Every checkpoint commit is durable before it returns, whatever the database's or role's default.

    The guard's armed records must be on disk before the target is touched (see ``_sqlite_pragmas``). A
    database or role set to ``synchronous_commit = off`` (a common tuning) acknowledges commits the server
    then loses in a crash: a retry would find no armed record and move the partitions again. A session may
    always raise its own setting, so a lossy default is raised to ``on``; stronger ones (``remote_write``,
    ``remote_apply``) are kept.
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SHOW synchronous_commit")
        row = cursor.fetchone()
        if row is not None and str(row[0]).lower() in _LOSSY_COMMITS:
            cursor.execute("SET synchronous_commit TO on")
    finally:
        cursor.close()
    dbapi_connection.commit()


def statement_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """The configured statement timeout in seconds, or ``connection_invalid`` naming the variable."""
    raw = (os.environ if env is None else env).get(STATEMENT_TIMEOUT_ENV, "").strip()
    if not raw:
        return POSTGRES_STATEMENT_TIMEOUT_S
    low, high = STATEMENT_TIMEOUT_RANGE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not low <= value <= high:  # also refuses NaN
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{STATEMENT_TIMEOUT_ENV} must be a number of seconds from {low:g} to {high:g}",
            details={"variable": STATEMENT_TIMEOUT_ENV},
        )
    return value


def postgres_connect_args(query: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
    """psycopg2 ``connect()`` arguments bounding every call: see the module docstring.

    ``options`` given in the URL's query are kept, with the statement timeout and the server's keepalives
    appended.
    """
    timeout_ms = max(1, round(timeout_s * 1000))
    deadline_s = timeout_s + CLIENT_GRACE_S
    options = (
        f"-c statement_timeout={timeout_ms} -c tcp_keepalives_idle={KEEPALIVE_IDLE_S} "
        f"-c tcp_keepalives_interval={KEEPALIVE_INTERVAL_S} -c tcp_keepalives_count={KEEPALIVE_COUNT}"
    )
    given = query.get("options")
    if isinstance(given, tuple):
        given = " ".join(given)
    if given:
        options = f"{given} {options}"
    return {
        # a server given a short statement deadline is not given longer to accept a connection
        "connect_timeout": min(POSTGRES_CONNECT_TIMEOUT_S, math.ceil(deadline_s)),
        "application_name": "dpone-checkpoints",
        "options": options,
        "keepalives": 1,
        "keepalives_idle": KEEPALIVE_IDLE_S,
        "keepalives_interval": KEEPALIVE_INTERVAL_S,
        "keepalives_count": KEEPALIVE_COUNT,
        "tcp_user_timeout": round(deadline_s * 1000),
        "connection_factory": bounded_connection_factory(deadline_s),
    }


class _Watchdog:
    """One daemon thread that shuts down the socket of a call which outlived its deadline.

    The socket is shut down (not closed): the file descriptor stays libpq's, the blocked ``recv`` returns
    at once and libpq reports a lost connection. Expiry and disarming take the same lock, so a socket is
    never touched after its call returned and disarmed it (its descriptor may be reused after that).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, int]] = []
        self._armed: set[int] = set()
        self._expired: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    @contextmanager
    def bounded(self, fileno: int, timeout_s: float) -> Iterator[Callable[[], bool]]:
        """Arm a deadline for the block; yields a function telling whether the deadline cut it off."""
        token = next(self._tokens)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + timeout_s, token, fileno))
            self._armed.add(token)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dpone-checkpoint-deadline", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        try:
            yield lambda: token in self._expired
        finally:
            with self._cond:
                self._armed.discard(token)
                self._expired.discard(token)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token, fileno = self._heap[0]
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                heapq.heappop(self._heap)
                self._armed.discard(token)
                self._expired.add(token)
                _shut_down(fileno)


def _shut_down(fileno: int) -> None:
    try:
        sock = socket.socket(fileno=os.dup(fileno))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


_WATCHDOG = _Watchdog()


@functools.cache
def bounded_connection_factory(deadline_s: float) -> Callable[..., Any]:
    """A psycopg2 ``connection_factory`` whose statements, commits and rollbacks end within ``deadline_s``."""
    import psycopg2
    import psycopg2.extensions

    class CheckpointStoreTimeout(psycopg2.OperationalError):  # type: ignore[misc]
        """The server did not answer within the client deadline; the connection was cut off."""

    def bounded(conn: Any, call: Callable[[], Any]) -> Any:
        with _WATCHDOG.bounded(conn.fileno(), deadline_s) as expired:
            try:
                return call()
            except psycopg2.Error as exc:
                if expired():
                    raise CheckpointStoreTimeout(
                        f"server closed the connection unexpectedly: no answer within {deadline_s:g} s"
                    ) from exc
                raise

    class BoundedCursor(psycopg2.extensions.cursor):  # type: ignore[misc]
        def execute(self, query: Any, vars: Any = None) -> Any:
            return bounded(self.connection, lambda: super(BoundedCursor, self).execute(query, vars))

        def executemany(self, query: Any, vars_list: Any) -> Any:
            return bounded(self.connection, lambda: super(BoundedCursor, self).executemany(query, vars_list))

    class BoundedConnection(psycopg2.extensions.connection):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.cursor_factory = BoundedCursor

        def commit(self) -> None:
            bounded(self, super().commit)

        def rollback(self) -> None:
            bounded(self, super().rollback)

    return BoundedConnection


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:")


def _sqlite_engine(url: URL) -> Engine:
    connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_S}
    if _is_memory(url):
        # One shared connection, or every pooled connection would see its own empty database.
        connect_args["check_same_thread"] = False
        engine = create_engine(url, connect_args=connect_args, poolclass=StaticPool, hide_parameters=True)
    else:
        if url.query.get("uri") not in ("true", ("true",)) and url.database is not None:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args=connect_args, hide_parameters=True)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL so a CLI writer and a reader worker share the file; FULL sync so a commit survives power loss.

    The guard's armed records must be on disk before the target is touched: NORMAL alone would make WAL
    commits durable only at the next checkpoint. ``write_batch`` relaxes it to NORMAL for the rows of a
    batch before its last, whose FULL commit syncs them all (``batch_sync``).
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        _switch_to_wal(cursor)
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    """Set WAL mode, waiting like the busy timeout would: SQLite does not apply its busy handler here.

    Converting a new file to WAL takes an exclusive lock and fails at once with "database is locked" when
    several processes open the new file together (seen when workers race ``ensure_schema``). Waiting for
    the lock is not a retry of a failed operation; a different error is raised immediately.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
