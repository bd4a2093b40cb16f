"""The fixed reader worker: ``python -m airflow_provider_dpone.adapters.target_reader.worker``.

It bounds itself first (``PR_SET_PDEATHSIG`` and a ``setitimer`` deadline ending in ``os._exit``), reads
one request frame from stdin, opens its own access from the endpoint descriptor in it (its own HTTP calls,
``readonly=1`` on each, for a server; a clickhouse-connect client for embedded chDB), reads ``readonly``
back (fail closed when it cannot prove it, or when an ``*_overflow_mode`` is ``break``), runs the one
generated SELECT, writes exactly one canonical JSON frame to its original stdout, and exits 0. Everything
else (libraries printing, logging) goes to stderr or nowhere: fd 1 is pointed at /dev/null before any
vendor import, the frame uses a private duplicate.

``readonly=1`` (not 2): on ClickHouse 18.16 ``readonly=2`` still lets a query switch ``readonly`` back to
0, while ``readonly=1`` refuses every setting change and every write. The read-back uses
``system.settings``, which both 18.16 (no ``getSetting()``) and modern chDB have.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from typing import Any

from airflow_provider_dpone.adapters.target_reader.protocol import (
    REQUEST_FRAME_MAX_BYTES,
    ProbeReadyFrame,
    WorkerRequestFrame,
)
from airflow_provider_dpone.adapters.target_reader.select_builder import build_select, column_types_query
from airflow_provider_dpone.contracts.capsule import canonical_bytes
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor
from airflow_provider_dpone.contracts.target_observation import (
    METRIC_VALUE_MAX,
    MetricValue,
    ObservationStatus,
    ReaderResponseFrame,
    TargetObservation,
    TargetReadRequest,
    UnavailableReason,
    WorkerErrorCode,
)

READONLY_VALUE = "1"
#: ``readonly`` and every ``*_overflow_mode``: one read-back of what the measuring SELECT runs under.
_SETTINGS_QUERY = (
    "SELECT name, value FROM system.settings WHERE name = 'readonly' OR name LIKE '%overflow_mode%'"
)


class WorkerFault(Exception):
    """A failure with a fixed worker error code (no vendor message travels further)."""

    def __init__(self, code: WorkerErrorCode) -> None:
        super().__init__(code.value)
        self.code = code


def open_readonly_client(endpoint: EndpointDescriptor, timeout_s: float, proxy: str | None = None) -> Any:
    """A fresh client with ``readonly=1`` applied and verified by reading it back; else WorkerFault.
    ``proxy``: the HTTP proxy the parent resolved for the server (a server only)."""
    try:
        if endpoint.interface is ClickHouseInterface.CHDB:
            from airflow_provider_dpone.adapters.clickhouse.client import open_client

            if not endpoint.path:
                raise WorkerFault(WorkerErrorCode.REQUEST_INVALID)
            client: Any = open_client(endpoint, readonly=True)
        else:
            from airflow_provider_dpone.adapters.target_reader.http_client import ReadOnlyHttpClient

            # the worker's own calls: readonly=1 on every request, no client start-up queries
            client = ReadOnlyHttpClient(endpoint, time.monotonic() + timeout_s, proxy=proxy)
    except WorkerFault:
        raise
    except Exception as exc:
        raise WorkerFault(WorkerErrorCode.CONNECT_FAILED) from exc
    try:
        verify_readonly(client)
    except WorkerFault as fault:
        close_quietly(client)
        cause = classify_failure(fault.__cause__) if fault.__cause__ is not None else None
        if cause is WorkerErrorCode.CONNECTION_LOST:  # the first request could not reach the server
            raise WorkerFault(WorkerErrorCode.CONNECT_FAILED) from fault.__cause__
        if cause is WorkerErrorCode.ACCESS_DENIED:
            raise WorkerFault(WorkerErrorCode.ACCESS_DENIED) from fault.__cause__
        raise
    except BaseException:
        close_quietly(client)
        raise
    return client


def verify_readonly(client: Any) -> None:
    """``readonly=1`` read back, and no limit that may end the measuring SELECT early without an error.

    With ``break`` a limit such as ``max_rows_to_read`` or ``max_execution_time`` ends the SELECT early and
    it answers counts of part of the generation: a duplicate past the cut would pass ``count == distinct``.
    The connection's settings arrive with every mode ``throw`` (``protocol.measuring_settings``); a user
    profile's ``break``, which ``readonly=1`` forbids overriding, measures nothing (``limits_may_cut_reads``)."""
    try:
        rows = client.query(_SETTINGS_QUERY).result_rows
    except Exception as exc:
        raise WorkerFault(WorkerErrorCode.READONLY_UNVERIFIED) from exc
    settings = {str(name): str(value) for name, value in rows}
    if settings.get("readonly") != READONLY_VALUE:
        raise WorkerFault(WorkerErrorCode.READONLY_UNVERIFIED)
    if any(value == "break" for name, value in settings.items() if name != "readonly"):
        raise WorkerFault(WorkerErrorCode.LIMITS_MAY_CUT_READS)


def close_quietly(client: Any) -> None:
    # Closing is best effort: the process exits right after.
    with contextlib.suppress(Exception):
        client.close()


#: Server error codes meaning "this exact function cannot be computed on this column's type":
#: ILLEGAL_TYPE_OF_ARGUMENT, ILLEGAL_COLUMN, NOT_IMPLEMENTED. The only failures a warn-only plan may
#: record as ``unavailable``; every other failure stays a worker failure (the capsule stays pending).
NOT_COMPUTABLE_CODES = frozenset({43, 44, 48})
_MISSING_CODES = frozenset({60, 81})  # UNKNOWN_TABLE, UNKNOWN_DATABASE
_CANCELLED_CODES = frozenset({394})  # QUERY_WAS_CANCELLED (KILL QUERY)
_ACCESS_CODES = frozenset({164, 192, 193, 194, 195, 197, 291, 497, 516})  # readonly, user, password, access
_NETWORK_CODES = frozenset({209, 210})  # SOCKET_TIMEOUT, NETWORK_ERROR
_SERVER_CODE_RE = re.compile(r"\bCode: ([0-9]{1,5})[.,]")


def server_error_code(exc: BaseException) -> int | None:
    """The ClickHouse error code a server answer carried, if the failure was a server answer at all."""
    from clickhouse_connect.driver.exceptions import DatabaseError

    if not isinstance(exc, DatabaseError):
        return None
    code = getattr(exc, "code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    found = _SERVER_CODE_RE.search(str(exc))  # 18.16 over HTTP and chDB carry it in the text only
    return int(found.group(1)) if found else None


def classify_failure(exc: BaseException) -> WorkerErrorCode:
    """The fixed worker error code of a failed target query (no vendor text leaves the worker)."""
    from clickhouse_connect.driver.exceptions import OperationalError

    code = server_error_code(exc)
    if code in _CANCELLED_CODES:
        return WorkerErrorCode.QUERY_CANCELLED
    if code in _MISSING_CODES:
        return WorkerErrorCode.TARGET_MISSING
    if code in _ACCESS_CODES:
        return WorkerErrorCode.ACCESS_DENIED
    if code in _NETWORK_CODES or (code is None and isinstance(exc, (OperationalError, OSError))):
        return WorkerErrorCode.CONNECTION_LOST
    return WorkerErrorCode.QUERY_FAILED


def measure(client: Any, request: TargetReadRequest) -> TargetObservation:
    """Look up the column types, run the generated SELECT. Only a classified "metric not computable"
    server answer becomes ``unavailable``, and only when the plan allows it; everything else fails."""
    try:
        typed = client.query(column_types_query(request.target_table)).result_rows
    except Exception as exc:
        raise WorkerFault(classify_failure(exc)) from exc
    types = {str(name): str(kind) for name, kind in typed}
    if not types:  # system.columns knows no such table: the generation is gone, not "unavailable"
        raise WorkerFault(WorkerErrorCode.TARGET_MISSING)
    if any(column not in types for column in request.columns):
        raise WorkerFault(WorkerErrorCode.TARGET_MISSING)
    try:
        sql, keys = build_select(request, types)
        rows = client.query(sql).result_rows
    except Exception as exc:
        if request.allow_unavailable and server_error_code(exc) in NOT_COMPUTABLE_CODES:
            return TargetObservation(
                request_sha256=request.sha256(),
                status=ObservationStatus.UNAVAILABLE,
                unavailable_reason=UnavailableReason.METRIC_NOT_COMPUTABLE,
            )
        raise WorkerFault(classify_failure(exc)) from exc
    if len(rows) != 1 or len(rows[0]) != len(keys):
        raise WorkerFault(WorkerErrorCode.QUERY_FAILED)
    metrics = []
    for (metric, column), raw in zip(keys, rows[0], strict=True):
        # over HTTP (JSONCompact) a UInt64 arrives as its decimal text
        value = int(raw) if isinstance(raw, str) and raw.isascii() and raw.isdigit() else raw
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= METRIC_VALUE_MAX:
            raise WorkerFault(WorkerErrorCode.QUERY_FAILED)
        metrics.append(MetricValue(metric=metric, column=column, value=value))
    return TargetObservation(
        request_sha256=request.sha256(), status=ObservationStatus.COMPLETE, metrics=tuple(metrics)
    )


def read_frame(fd: int, limit: int) -> bytes:
    """Bytes up to and including the first newline, at most ``limit``; EOF ends the frame too."""
    data = bytearray()
    while b"\n" not in data:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise WorkerFault(WorkerErrorCode.REQUEST_INVALID)
    line, _, _ = bytes(data).partition(b"\n")
    return line


def write_frame(fd: int, frame: bytes) -> None:
    view = memoryview(frame)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _observe(frame: WorkerRequestFrame) -> ReaderResponseFrame:
    assert frame.endpoint is not None and frame.request is not None
    try:
        client = open_readonly_client(
            frame.endpoint.descriptor(), frame.budget_ms / 1000, proxy=frame.endpoint.proxy
        )
        try:
            observation = measure(client, frame.request)
        finally:
            close_quietly(client)
    except WorkerFault as fault:
        return ReaderResponseFrame(nonce=frame.nonce, error=fault.code)
    except Exception:
        return ReaderResponseFrame(nonce=frame.nonce, error=WorkerErrorCode.INTERNAL)
    return ReaderResponseFrame(nonce=frame.nonce, observation=observation)


#: Until the request frame names the budget, the worker gives itself the ADR's whole 60 s to read it.
STARTUP_DEADLINE_S = 60.0
#: Exit status of a worker that ended itself at its own deadline (or at its parent's death).
EXIT_DEADLINE = 124
_PR_SET_PDEATHSIG = 1
#: The supervising process's PID, set by the supervisor (not secret).
PARENT_VARIABLE = "DPONE_READER_PARENT"


def arm_own_deadline(seconds: float) -> None:
    """End this process at ``seconds`` from now whatever it is doing, parent alive or not.

    ``setitimer`` delivers SIGALRM; the handler leaves with ``os._exit`` (no teardown, no frame). The
    handler runs between bytecodes; a vendor call that holds the interpreter past it meets the parent's
    group SIGKILL instead, or, with the parent gone, the parent-death signal below.
    """
    signal.signal(signal.SIGALRM, _deadline_reached)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, seconds))


def _deadline_reached(signum: int, frame: object) -> None:
    os._exit(EXIT_DEADLINE)


def exit_with_parent() -> None:
    """Ask the kernel for SIGKILL when the parent dies (Linux ``PR_SET_PDEATHSIG``); if the parent is
    already gone (we were re-parented before asking: our parent is no longer the PID the supervisor
    put in our environment), leave now."""
    expected = os.environ.get(PARENT_VARIABLE, "")
    parent = int(expected) if expected.isdigit() else os.getppid()
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(EXIT_DEADLINE)


def main() -> int:
    started = time.monotonic()
    exit_with_parent()
    arm_own_deadline(STARTUP_DEADLINE_S)
    # Keep the real stdout for the one frame; everything else written to fd 1 goes nowhere.
    frame_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        frame = WorkerRequestFrame.decode(read_frame(0, REQUEST_FRAME_MAX_BYTES))
    except Exception:
        return 2  # no trustworthy nonce to answer with: the parent sees no frame and a non-zero exit
    arm_own_deadline(frame.budget_ms / 1000 - (time.monotonic() - started))
    if frame.mode == "probe":
        write_frame(frame_fd, canonical_bytes(ProbeReadyFrame(nonce=frame.nonce)) + b"\n")
        os.close(frame_fd)
        while os.read(0, 65536):  # wait for the parent to kill us (or close our stdin)
            pass
        return 0
    answer = _observe(frame)
    write_frame(frame_fd, canonical_bytes(answer) + b"\n")
    os.close(frame_fd)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # Skip interpreter teardown (embedded engine destructors can be slow); the frame is already written.
    os._exit(code)
