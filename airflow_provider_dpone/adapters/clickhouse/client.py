"""Opening and closing clickhouse-connect clients from an endpoint descriptor.

Server notes (ClickHouse 18.16 over HTTP, clickhouse-connect 1.6.0): no lz4, so ``compress=False``; no
Arrow format and no DateTime64, so inserts are Native with explicit column types. The endpoint's database
is not made the session database: on a server a missing database fails the connection itself, and every
statement the sink sends is fully qualified (the database is created by ``prepare_target``).

chDB notes: one chDB path per process at a time; a second path opens only after every client of the
first is closed. :func:`close_client` therefore never raises, so a ``finally`` always releases the path.

Bounded waits (server only): the TCP connect waits at most the endpoint's ``connect_timeout_s``, and
every wait for the server's answer at most its ``receive_timeout_s`` (clickhouse-connect's
``send_receive_timeout``; the server's progress headers do not always keep a long statement alive: the
18.16 server sends none while copying a staging table, and the statement goes on after the client gives
up, see ``statements_in_flight``). Unset on the endpoint (Airflow connection extras ``connect_timeout`` and
``send_receive_timeout``), they come from the environment variables :data:`CONNECT_TIMEOUT_ENV` and
:data:`RECEIVE_TIMEOUT_ENV`, else :data:`CONNECT_TIMEOUT_S` and :data:`RECEIVE_TIMEOUT_S`. A frozen server
then fails the connect as ``target_unreachable`` instead of hanging for clickhouse-connect's 300 s.

Cut answers (server only): the driver reads the server's version and settings list when it connects; an
answer cut short on the way (an HTTP/1.0 proxy hands one cut after its headers on as complete and empty) is
``target_unreachable`` saying so (:func:`_read_whole`), never a client that knows no setting.

Connection extras (both interfaces): ``session_settings`` go with every query of the client (a name the
server does not know is ``connection_invalid`` naming nothing but the connection); ``verify`` (server
only) checks the TLS certificate of a ``secure`` connection.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import timezone, tzinfo
from types import FrameType
from typing import Any

import clickhouse_connect
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError, ProgrammingError

from airflow_provider_dpone.adapters.clickhouse.driver_versions import server_code, version_mismatch
from airflow_provider_dpone.adapters.clickhouse.readonly_pool import (
    ReadOnlyPoolManager,
    ReadOnlyProxyManager,
    readonly_pool,
)
from airflow_provider_dpone.adapters.clickhouse.write_pool import (
    WritePoolManager,
    WriteProxyManager,
    write_pool,
)
from airflow_provider_dpone.contracts.endpoints import (
    MAX_TIMEOUT_S,
    ClickHouseInterface,
    EndpointDescriptor,
    EndpointKind,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

log = logging.getLogger(__name__)

EMBEDDED_EXTRA_HINT = "install the embedded extra: pip install 'airflow-provider-dpone[embedded]'"
#: Seconds to wait for a TCP connection to a server (not for query execution).
CONNECT_TIMEOUT_S = 10
#: Seconds to wait for each answer of a server (clickhouse-connect's ``send_receive_timeout``).
RECEIVE_TIMEOUT_S = 120
CONNECT_TIMEOUT_ENV = "DPONE_CLICKHOUSE_CONNECT_TIMEOUT_S"
RECEIVE_TIMEOUT_ENV = "DPONE_CLICKHOUSE_SEND_RECEIVE_TIMEOUT_S"


#: Session settings of every embedded (chDB) client, for memory that does not grow with the table. The
#: staged publish (``INSERT INTO target SELECT ... FROM staging``) squashes the staging rows into insert
#: blocks of up to 1,048,576 rows (256 MB) by default and sorts each block by the target's key in memory:
#: +100 MB at 1M rows, +335 MB at 5M (measured, VmRSS). 65,536-row blocks bound it (5M: 814 -> 607 MB peak).
#: Only the part layout changes (more, smaller parts that background merges join); the rows are the same.
CHDB_MEMORY_SETTINGS: dict[str, int] = {
    "max_insert_block_size": 65_536,
    "min_insert_block_size_rows": 65_536,
    "min_insert_block_size_bytes": 0,
    "max_threads": 1,
}


def http_timeouts(endpoint: EndpointDescriptor, env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(connect, send_receive)`` seconds: the endpoint's, else the environment's, else the defaults."""
    environ: Mapping[str, str] = os.environ if env is None else env
    connect = endpoint.connect_timeout_s or _env_seconds(environ, CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S)
    receive = endpoint.receive_timeout_s or _env_seconds(environ, RECEIVE_TIMEOUT_ENV, RECEIVE_TIMEOUT_S)
    return connect, receive


def _env_seconds(env: Mapping[str, str], variable: str, default: int) -> int:
    raw = env.get(variable, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_TIMEOUT_S:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{variable} must be a whole number of seconds from 1 to {MAX_TIMEOUT_S}",
            details={"variable": variable},
        )
    return int(raw)


def open_client(endpoint: EndpointDescriptor, *, readonly: bool = False) -> Client:
    """A connected client, or ``target_unreachable`` / ``embedded_extra_missing`` (safe, chained).

    The one factory of the sink, the hook and the reader worker's embedded path. ``readonly`` (the
    reader worker on chDB, the hook's reads on both interfaces) applies ``readonly=1`` and selects the
    endpoint's database. Over HTTP every request of a read-only client, the driver's start-up queries
    included, carries ``readonly=1`` last in its URL (``readonly_pool``), with no session. The reader
    worker still uses its own stateless client over HTTP (``target_reader/http_client``)."""
    if endpoint.kind is not EndpointKind.CLICKHOUSE:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{endpoint.describe()} is not a ClickHouse connection",
            details={"connection": endpoint.name},
        )
    if endpoint.interface is ClickHouseInterface.CHDB:
        client = _open_chdb(endpoint, readonly=readonly)
    else:
        client = _open_http(endpoint, readonly=readonly)
    return client if readonly else results_in_full(client)


def results_in_full(client: Client) -> Client:
    """Every ``*_overflow_mode`` the engine knows set to ``throw`` on this client, over what a settings
    profile or the connection's ``session_settings`` say. With ``break``, a limit (``max_rows_to_read``,
    ``max_result_rows``, ``max_execution_time`` ...) ends a statement early *without an error*: a staged
    publish's ``INSERT ... SELECT`` copied part of the staging rows and the run committed them all (seen:
    52,486 of 200,000 rows, exit 0), and a count could read part of a table. A limit now fails the
    statement instead. (A read-only client's requests carry ``readonly=1``, which forbids changing a
    setting: those keep the profile's modes.)"""
    for name in client.server_settings:
        if name.endswith(("_overflow_mode", "_overflow_mode_leaf")):
            client.set_client_setting(name, "throw")
    return client


def url_host(host: str) -> str:
    """``host`` as a URL spells it: an IPv6 address in brackets (the client builds ``http://host:port`` and
    an address of Airflow's URI form arrives without them: every request failed, ``target_unreachable``)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _open_http(endpoint: EndpointDescriptor, *, readonly: bool = False) -> Client:
    connect_timeout, receive_timeout = http_timeouts(endpoint)
    kwargs: dict[str, Any] = {
        "host": url_host(endpoint.host or "localhost"),
        "username": endpoint.user or "default",
        "password": endpoint.secret() or "",
        "secure": endpoint.secure,
        "compress": False,
        "connect_timeout": connect_timeout,
        "send_receive_timeout": receive_timeout,
        "verify": endpoint.verify,
    }
    if endpoint.session_settings:
        kwargs["settings"] = dict(endpoint.session_settings)
    if endpoint.port is not None:
        kwargs["port"] = endpoint.port
    if readonly:
        kwargs.update(_readonly_http_kwargs(endpoint))
    else:  # a statement that changes the server is never sent twice (``write_pool``)
        kwargs["pool_mgr"] = write_pool(
            secure=endpoint.secure,
            host=endpoint.host or "localhost",
            port=endpoint.port or (8443 if endpoint.secure else 8123),
            verify=endpoint.verify,
        )
    return _read_whole(endpoint, _connect(endpoint, kwargs))


def _connect(endpoint: EndpointDescriptor, kwargs: dict[str, Any]) -> Client:
    """``get_client``, its failures mapped to safe errors (``settings``: the connection's session settings)."""
    connect_timeout, receive_timeout = kwargs["connect_timeout"], kwargs["send_receive_timeout"]
    try:
        return clickhouse_connect.get_client(**kwargs)
    except Exception as exc:
        if isinstance(exc, ProgrammingError) and kwargs.get("settings"):
            raise _refused_setting(endpoint, kwargs, exc) from exc
        if isinstance(exc, OperationalError) and str(exc).startswith(_VERSION_CUT):
            raise _incomplete_at_connect(endpoint, "version", exc) from exc
        mismatch = version_mismatch(endpoint, exc)
        if mismatch is not None:
            raise mismatch from exc
        if endpoint.secure and endpoint.verify and tls_unverified(exc):
            raise DponeError(  # a retry meets the same certificate: the connection is what must change
                ErrorCode.CONNECTION_INVALID,
                f"the TLS certificate of the ClickHouse server of {endpoint.describe()} could not be verified "
                "(install its CA where the client trusts it; verify: false only for a server you trust)",
                details=failure_details(endpoint, exc),
            ) from exc
        if login_refused(exc):  # still retryable: the connection may be corrected before the next try
            raise DponeError(
                ErrorCode.TARGET_UNREACHABLE,
                f"could not connect to the ClickHouse server of {endpoint.describe()}: the server refused "
                "the login (an unknown user or a wrong password)",
                details={**failure_details(endpoint, exc), "cause": "login_refused"},
                hint_lines=(
                    "check the user and password the connection holds; every try meets the same login",
                ),
            ) from exc
        raise DponeError(
            ErrorCode.TARGET_UNREACHABLE,
            f"could not connect to the ClickHouse server of {endpoint.describe()}",
            details={
                **failure_details(endpoint, exc),
                "connect_timeout_s": connect_timeout,
                "receive_timeout_s": receive_timeout,
            },
        ) from exc


#: Settings every ClickHouse lists in ``system.settings`` (18.16 to today): a list the driver read at connect
#: without them came back cut short (the writing client's overflow modes and insert settings rest on it).
_ALWAYS_LISTED = frozenset({"max_threads", "readonly", "result_overflow_mode"})
#: How clickhouse-connect's start-up read of the server version fails on an answer without its row
#: (``init_sequence``); only this prefix of its message is looked at, nothing of it is repeated.
_VERSION_CUT = "Unexpected response to server version query"


def _read_whole(endpoint: EndpointDescriptor, client: Client) -> Client:
    """``client`` when what the driver read at connect is whole: its server version and settings list.

    Behind an HTTP proxy that speaks HTTP/1.0 to the server, an answer cut right after its headers arrives
    as a complete, empty one (ADR 0094, addendum). The settings list so cut opened a client that knew no
    setting: no overflow mode made to throw, and the run stopped on a misleading, non-retryable
    ``target_table_incompatible`` ("reports neither insert_deduplication_token nor insert_deduplicate")."""
    if client.server_version and client.server_settings.keys() >= _ALWAYS_LISTED:
        return client
    close_client(client)
    raise _incomplete_at_connect(endpoint, "settings" if client.server_version else "version")


def _refused_setting(endpoint: EndpointDescriptor, kwargs: dict[str, Any], exc: BaseException) -> DponeError:
    """A name of ``session_settings`` the driver refused at connect: unknown to the server, or the settings
    list it read came back cut (every name then looks unknown). A connect without them reads the list again
    and tells which; either way its client is closed (which releases the pool of both)."""
    probe = _connect(endpoint, {key: value for key, value in kwargs.items() if key != "settings"})
    try:
        known = probe.server_settings
        if not known.keys() >= _ALWAYS_LISTED:
            return _incomplete_at_connect(endpoint, "settings")
        for name in endpoint.session_settings:
            if name not in known or known[name].readonly:
                return _unknown_setting(endpoint, exc)
        return _incomplete_at_connect(endpoint, "settings")  # all known now: the first list was cut
    finally:
        close_client(probe)


def _incomplete_at_connect(
    endpoint: EndpointDescriptor, read: str, exc: BaseException | None = None
) -> DponeError:
    """``target_unreachable`` (retryable) for a start-up read whose answer came back incomplete."""
    details: dict[str, Any] = {
        "connection": endpoint.name,
        "interface": (endpoint.interface or ClickHouseInterface.HTTP).value,
        "cause": "incomplete_answer_at_connect",
        "read": f"server_{read}",
    }
    if exc is not None:
        details["error_class"] = type(exc).__name__
    return DponeError(
        ErrorCode.TARGET_UNREACHABLE,
        f"could not connect to the ClickHouse server of {endpoint.describe()}: the server's answer to the "
        f"client's start-up read of its {read} arrived incomplete (cut short between the worker and the server)",
        details=details,
        hint_lines=(
            "check any HTTP proxy between the worker and the server (its logs and timeouts): one that "
            "speaks HTTP/1.0 to the server (nginx's default, proxy_http_version 1.0) hands on an answer cut "
            "short as a complete one; with proxy_http_version 1.1 a cut answer fails as broken",
            "the connect sent no statement; the next try (an Airflow retry, or run again) reads anew",
        ),
    )


def _readonly_http_kwargs(endpoint: EndpointDescriptor) -> dict[str, Any]:
    """The pool that puts ``readonly=1`` on every request, no session, and the endpoint's database."""
    pool = readonly_pool(
        secure=endpoint.secure,
        host=endpoint.host or "localhost",
        port=endpoint.port or (8443 if endpoint.secure else 8123),
        verify=endpoint.verify,
    )
    kwargs: dict[str, Any] = {"pool_mgr": pool, "autogenerate_session_id": False}
    if endpoint.database:
        kwargs["database"] = endpoint.database
    return kwargs


_CHDB_LOADING = threading.Lock()


class _ChdbImport:
    """Whether an import of chDB in this process was cut by a timeout or an interrupt."""

    interrupted = False


#: pybind11's answer when chDB's extension initialises again in a process where an earlier import was cut
_REINIT_MARK = "is already registered"


def _reinit_refused(exc: BaseException) -> bool:
    """Whether ``exc`` (chDB's own "chdb-core engine not found") sits over pybind11 refusing a second init:
    an import cut earlier in this process, by any importer, left the extension's types registered."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        link = pending.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        if isinstance(link, ImportError) and _REINIT_MARK in str(link):
            return True
        pending.extend(e for e in (link.__cause__, link.__context__) if e is not None)
    return False


class _HeldSignals:
    """The process's Python signal handlers, held while chDB loads in the main thread, run once it is loaded.

    chDB's extension is built with pybind11, whose module init turns any exception raised inside it into an
    ImportError that keeps only its text: Airflow's ``AirflowTaskTimeout``, raised by its SIGALRM handler
    while the extension initialised, left the task as chDB's "chdb-core engine not found", then "install the
    embedded extra" (not retryable), and every later import in the process failed too. Held, each signal's
    own handler runs after the import and raises its own exception object, the one its caller looks for.
    Handlers run in the main thread only, so an import in another thread cannot be cut by one."""

    def __init__(self) -> None:
        self._handlers: dict[int, Callable[[int, FrameType | None], Any]] = {}
        self._held: list[tuple[int, FrameType | None]] = []

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in signal.valid_signals():
            handler = signal.getsignal(signum)
            if callable(handler):
                self._handlers[signum] = handler
                signal.signal(signum, self._hold)

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self._held.append((signum, frame))

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        for signum, frame in self._held:  # the first handler that raises ends the open, as it would have
            self._handlers[signum](signum, frame)


def _load_chdb_in_utc() -> None:
    """Import chDB with ``TZ=UTC``, then give the process its own ``TZ`` back.

    The embedded engine takes its default time zone from ``TZ`` once, when it loads, and a part's partition
    value (``toYYYYMMDD(at)`` of a zoneless ``DateTime``) is computed in the zone of the process that
    inserted it, while a count prunes parts in the zone of the process that counts. Seen: a day loaded under
    ``TZ=Asia/Kolkata`` counted 0 rows under ``TZ=America/New_York``; adoption left it to run and it was
    appended twice (4 target rows for 3), exit 0. Pinned, every process counts what every other inserted.
    The process's ``TZ`` reads UTC while chDB imports (once per process, under a lock against other loaders):
    another thread reading the environment in that moment sees UTC."""
    with _CHDB_LOADING:  # a second thread would take the first one's UTC for the process's own zone
        if sys.modules.get("chdb") is not None:  # loaded (None: an import that failed, or was blocked)
            return
        own = os.environ.get("TZ")
        os.environ["TZ"] = "UTC"
        try:
            with _HeldSignals():
                importlib.import_module("chdb")
        except BaseException as exc:
            if not isinstance(exc, Exception):  # cut by something no signal handler raised
                _ChdbImport.interrupted = True
            raise
        finally:
            if own is None:
                del os.environ["TZ"]
            else:
                os.environ["TZ"] = own
            time.tzset()


#: zone names that are UTC at every instant (an offset of zero today is not enough: a zone's past differs)
_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu"})


def _in_utc(zone: tzinfo) -> bool:
    """Whether ``zone`` is UTC at every instant: the fixed zero offset, or a zone named so."""
    if zone is timezone.utc:
        return True
    return str(getattr(zone, "key", zone)) in _UTC_NAMES


def _require_utc_engine(endpoint: EndpointDescriptor, client: Client) -> None:
    """The embedded engine counts in UTC, or nothing is read: chDB loaded in this process before dpone, in
    another zone, prunes parts by another calendar than the processes that inserted them."""
    if _in_utc(client.server_tz):
        return
    close_client(client)
    raise DponeError(
        ErrorCode.CONNECTION_INVALID,
        f"{endpoint.describe()}: the embedded ClickHouse in this process runs in a time zone other than UTC "
        "(chDB was loaded before dpone, under the process's TZ); its counts would not agree with the runs of "
        "other processes",
        details={"connection": endpoint.name, "cause": "embedded_zone_not_utc"},
        hint_lines=("run dpone in a process that does not import chdb first, or set TZ=UTC for it",),
    )


def _chdb_import_error(endpoint: EndpointDescriptor, exc: ImportError) -> DponeError:
    """A failed chDB import: retryable when an earlier import in this process was cut (a new process loads
    chDB whole), a missing extra otherwise."""
    if not (_ChdbImport.interrupted or _reinit_refused(exc)):
        return DponeError(
            ErrorCode.EMBEDDED_EXTRA_MISSING, EMBEDDED_EXTRA_HINT, details={"connection": endpoint.name}
        )
    return DponeError(
        ErrorCode.TARGET_UNREACHABLE,
        f"could not open the embedded ClickHouse of {endpoint.describe()}: the embedded engine's import was "
        "interrupted earlier in this process (a timeout or an interrupt), and chDB cannot load again in this "
        "process",
        details={"connection": endpoint.name, "cause": "embedded_import_interrupted"},
        hint_lines=(
            "retry in a new process: an Airflow task retry runs in one, or run the dpone command again",
            "if a task or a DAG file's import timed out while chDB loaded, give it a longer timeout",
        ),
    )


def _open_chdb(endpoint: EndpointDescriptor, *, readonly: bool = False) -> Client:
    try:
        _load_chdb_in_utc()
    except ImportError as exc:
        raise _chdb_import_error(endpoint, exc) from exc
    if not endpoint.path:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{endpoint.describe()} needs a path to the chDB data directory",
            details={"connection": endpoint.name},
        )
    # the embedded engine's defaults first, the connection's own session_settings win
    settings: dict[str, Any] = {**CHDB_MEMORY_SETTINGS, **endpoint.session_settings}
    try:
        if readonly:
            client = clickhouse_connect.get_client(
                interface="chdb",
                path=endpoint.path,
                database=endpoint.database,
                settings={**settings, "readonly": 1},
            )
        else:
            client = clickhouse_connect.get_client(interface="chdb", path=endpoint.path, settings=settings)
    except Exception as exc:
        if isinstance(exc, ProgrammingError) and endpoint.session_settings:
            raise _unknown_setting(endpoint, exc) from exc
        mismatch = version_mismatch(endpoint, exc)
        if mismatch is not None:
            raise mismatch from exc
        message = f"could not open the embedded ClickHouse of {endpoint.describe()}"
        hints: tuple[str, ...] = ()
        if "already initialized" in str(exc):
            message += ": another chDB path is open in this process"
            hints = ("close every client of the other chDB path before opening this one",)
        raise DponeError(
            ErrorCode.TARGET_UNREACHABLE,
            message,
            details=failure_details(endpoint, exc),
            hint_lines=hints,
        ) from exc
    _require_utc_engine(endpoint, client)
    return client


def _unknown_setting(endpoint: EndpointDescriptor, exc: BaseException) -> DponeError:
    # clickhouse-connect refuses a setting the server does not know before sending any query
    return DponeError(
        ErrorCode.CONNECTION_INVALID,
        f"{endpoint.describe()}: the server does not accept a name in the extra 'session_settings'",
        details=failure_details(endpoint, exc),
    )


def close_client(client: Client | None) -> None:
    """Close and never raise: releasing a chDB path must not be skipped by a failing close."""
    if client is None:
        return
    try:
        client.close()
        pool = getattr(client, "http", None)
        if isinstance(
            pool, ReadOnlyPoolManager | ReadOnlyProxyManager | WritePoolManager | WriteProxyManager
        ):  # the client's own
            pool.release()
    except Exception:  # a failing close must not mask the caller's own exception
        log.debug("closing a ClickHouse client failed", exc_info=True)


def tls_unverified(exc: BaseException) -> bool:
    """Whether a certificate check failed somewhere in ``exc``'s chain (causes, contexts, urllib3's
    ``reason`` and exception arguments); the certificate's own text is never read out."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, ssl.SSLCertVerificationError):
            return True
        todo += [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args]
    return False


#: Server codes of a refused login: UNKNOWN_USER and WRONG_PASSWORD (18.16), AUTHENTICATION_FAILED (later).
_LOGIN_REFUSED_CODES = frozenset({192, 193, 516})


def login_refused(exc: BaseException) -> bool:
    """Whether the server refused the connection's login. Only a code number and the HTTP status are read
    from the driver's message; nothing of it is repeated."""
    return server_code(exc) in _LOGIN_REFUSED_CODES or "HTTP status 401" in str(exc)


def failure_details(endpoint: EndpointDescriptor, exc: BaseException) -> dict[str, Any]:
    """Safe facts only: the connection name, the interface, the exception class and server code."""
    details: dict[str, Any] = {
        "connection": endpoint.name,
        "interface": (endpoint.interface or ClickHouseInterface.HTTP).value,
        "error_class": type(exc).__name__,
    }
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        details["server_code"] = code
    return details
