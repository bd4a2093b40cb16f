"""Bounded waits (issue 11, point 5): a frozen checkpoint PostgreSQL or ClickHouse server ends a call in time.

"Frozen" is SIGSTOP: the server's kernel still accepts connections and acknowledges TCP, but nothing
answers, so neither ``connect_timeout`` nor TCP keepalives end the wait. Each test freezes a private server
of its own (never the shared one) and always thaws it in ``finally``. A call that would hang runs in a
thread joined with a bound, so a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.checkpoint_sql.engine import (
    CLIENT_GRACE_S,
    STATEMENT_TIMEOUT_ENV,
    create_store_engine,
    parse_url,
)
from airflow_provider_dpone.adapters.checkpoint_sql.store import SqlCheckpointStore
from airflow_provider_dpone.adapters.clickhouse.client import close_client, open_client
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from tests.conftest import _unavailable, local_services

pytestmark = pytest.mark.service

STATEMENT_TIMEOUT_S = 2
#: What a frozen-server call may cost: the statement deadline, then one reconnect bounded the same way.
PG_BOUND_S = 20.0
RECEIVE_TIMEOUT_S = 2
CH_BOUND_S = 10.0


class PrivatePostgres:
    """A throwaway PostgreSQL cluster of this module only, which a test may freeze (SIGSTOP) and thaw."""

    def __init__(self, started: Any) -> None:
        self.started = started
        self.url: str = started.env["DPONE_TEST_PG_URL"]
        self._postmaster = int((Path(started.extra["data"]) / "postmaster.pid").read_text().split()[0])

    def _cluster_pids(self) -> list[int]:
        """The postmaster and its children (backends, checkpointer, walwriter, ...)."""
        pids = [self._postmaster]
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == self._postmaster:
                pids.append(int(entry))
        return pids

    def freeze(self) -> None:
        for pid in self._cluster_pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self._cluster_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    # not under pytest's tmp_path: its folders are private to root, and the cluster runs as ``postgres``
    root = Path(tempfile.mkdtemp(prefix="dpone-frozen-pg-"))
    try:
        try:
            started = local_services.start("postgres", root)
        except Exception as exc:
            _unavailable("PostgreSQL", f"starting a private one failed: {exc}")
        server = PrivatePostgres(started)
        try:
            yield server
        finally:
            server.thaw()
            local_services.stop(started)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_bounded(call: Callable[[], object], bound_s: float, on_timeout: Callable[[], None]) -> BaseException:
    """Run ``call`` in a thread; the exception it raised, or fail if it is still blocked after ``bound_s``."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(bound_s)
    if worker.is_alive():
        on_timeout()  # release the blocked call so the thread ends
        worker.join(60)
        pytest.fail(f"the call was still blocked after {bound_s} s", pytrace=False)
    assert outcome, "the call ended without an outcome"
    raised = outcome[0]
    assert raised is not None, "the call to a frozen server succeeded"
    return raised


def test_a_store_call_to_a_frozen_checkpoint_postgres_ends_within_the_bound_as_checkpoint_store_failed(
    private_postgres: PrivatePostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATEMENT_TIMEOUT_ENV, str(STATEMENT_TIMEOUT_S))
    store = SqlCheckpointStore(private_postgres.url)
    try:
        store.ensure_schema()
        assert store.list_routes() == []
        private_postgres.freeze()
        try:
            started = time.monotonic()
            raised = run_bounded(store.list_routes, PG_BOUND_S, private_postgres.thaw)
            elapsed = time.monotonic() - started
        finally:
            private_postgres.thaw()
        assert isinstance(raised, DponeError), repr(raised)
        assert raised.code is ErrorCode.CHECKPOINT_STORE_FAILED
        assert raised.details["operation"] == "list_routes"
        assert raised.__cause__ is not None
        assert elapsed >= STATEMENT_TIMEOUT_S  # the client waited for the server first, then gave up
        assert "dpone-pg-test-pw" not in str(raised) + repr(raised.details)
        # thawed, the same store works again: the cut-off connection was discarded, not reused
        assert store.list_routes() == []
    finally:
        store.close()


def test_a_checkpoint_write_to_a_frozen_postgres_ends_within_the_bound_and_leaves_no_hung_connection(
    private_postgres: PrivatePostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection is checked out and pinged first, then the server freezes inside the transaction."""
    monkeypatch.setenv(STATEMENT_TIMEOUT_ENV, str(STATEMENT_TIMEOUT_S))
    engine = create_store_engine(parse_url(private_postgres.url))
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
            private_postgres.freeze()
            try:
                started = time.monotonic()
                raised = run_bounded(
                    lambda: conn.execute(sa.text("SELECT 2")),
                    STATEMENT_TIMEOUT_S + CLIENT_GRACE_S + 5,
                    private_postgres.thaw,
                )
                elapsed = time.monotonic() - started
            finally:
                private_postgres.thaw()
        assert isinstance(raised, sa.exc.OperationalError), repr(raised)
        assert type(raised.orig).__name__ == "CheckpointStoreTimeout"
        assert raised.connection_invalidated  # the pool discards the cut-off connection
        assert STATEMENT_TIMEOUT_S <= elapsed < STATEMENT_TIMEOUT_S + CLIENT_GRACE_S + 2
    finally:
        engine.dispose()


def test_a_slow_statement_on_a_live_checkpoint_postgres_is_cancelled_by_the_configured_statement_timeout(
    private_postgres: PrivatePostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATEMENT_TIMEOUT_ENV, "0.5")
    engine = create_store_engine(parse_url(private_postgres.url))
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW statement_timeout")).scalar_one() == "500ms"
            started = time.monotonic()
            with pytest.raises(sa.exc.OperationalError) as cancelled:
                conn.execute(sa.text("SELECT pg_sleep(10)"))
            assert time.monotonic() - started < 5
        assert type(cancelled.value.orig).__name__ == "QueryCanceled"
    finally:
        engine.dispose()


# -- ClickHouse ------------------------------------------------------------------------------------------


def bounded_endpoint(endpoint: EndpointDescriptor) -> EndpointDescriptor:
    return endpoint.model_copy(update={"receive_timeout_s": RECEIVE_TIMEOUT_S, "connect_timeout_s": 2})


def test_opening_a_client_on_a_frozen_clickhouse_server_ends_within_the_receive_timeout_as_target_unreachable(
    private_clickhouse: Any,
) -> None:
    endpoint = bounded_endpoint(private_clickhouse.endpoint)
    os.kill(private_clickhouse.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        raised = run_bounded(
            lambda: close_client(open_client(endpoint)),
            CH_BOUND_S,
            lambda: os.kill(private_clickhouse.pid, signal.SIGCONT),
        )
        elapsed = time.monotonic() - started
    finally:
        os.kill(private_clickhouse.pid, signal.SIGCONT)
    assert isinstance(raised, DponeError), repr(raised)
    assert raised.code is ErrorCode.TARGET_UNREACHABLE
    assert raised.details["receive_timeout_s"] == RECEIVE_TIMEOUT_S
    assert elapsed >= RECEIVE_TIMEOUT_S - 0.5


def test_a_sink_call_to_a_clickhouse_server_frozen_after_connecting_ends_within_the_receive_timeout(
    private_clickhouse: Any,
) -> None:
    schema = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),))
    sink = ClickHouseSink(bounded_endpoint(private_clickhouse.endpoint))
    try:
        sink.prepare_target("shop.frozen", schema, ("id",))
        os.kill(private_clickhouse.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            raised = run_bounded(
                lambda: sink.count_rows("shop.frozen", None),
                CH_BOUND_S,
                lambda: os.kill(private_clickhouse.pid, signal.SIGCONT),
            )
            elapsed = time.monotonic() - started
        finally:
            os.kill(private_clickhouse.pid, signal.SIGCONT)
        assert isinstance(raised, DponeError), repr(raised)
        assert raised.code is ErrorCode.TARGET_UNREACHABLE, raised.code
        assert elapsed >= RECEIVE_TIMEOUT_S - 0.5
    finally:
        sink.close()


def test_a_server_that_accepts_and_never_answers_fails_the_connect_within_the_receive_timeout() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept_and_ignore() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    acceptor = threading.Thread(target=accept_and_ignore, daemon=True)
    acceptor.start()
    endpoint = EndpointDescriptor(
        name="silent",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.HTTP,
        host="127.0.0.1",
        port=listener.getsockname()[1],
        receive_timeout_s=RECEIVE_TIMEOUT_S,
    )

    def hang_up() -> None:
        stop.set()
        for conn in accepted:
            conn.close()

    try:
        started = time.monotonic()
        raised = run_bounded(lambda: close_client(open_client(endpoint)), CH_BOUND_S, hang_up)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        acceptor.join(5)
        for conn in accepted:
            conn.close()
        listener.close()
    assert isinstance(raised, DponeError), repr(raised)
    assert raised.code is ErrorCode.TARGET_UNREACHABLE
    assert RECEIVE_TIMEOUT_S - 0.5 <= elapsed < CH_BOUND_S
