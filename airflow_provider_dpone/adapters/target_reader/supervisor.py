"""``SupervisedTargetReader``: the parent side of the bounded reader (ADR 0074).

One observation is one child process, ``python -m <worker module>``, started in its own session (so its
process group is its PID) with a scrubbed environment and three private descriptors: stdin (the request
frame, credentials included), stdout (the answer frame), stderr (discarded). Nothing secret is in argv.

**The budget.** One monotonic deadline, fixed before the spawn, covers start-up, writing the request,
reading the answer, EOF and the worker's exit. All I/O is non-blocking behind a selector, so the parent
never waits past the deadline for anything the child does. A frame that arrives after it is never read.

**Shutdown.** After every observation — success or not — the parent SIGKILLs the whole process group
while the leader is still unreaped (its zombie pins the group ID, so the signal cannot reach a recycled
group) and every descendant that left it (``setsid``; found by the worker's instance marker), then reaps
the leader by PID and polls until none is left, within a separate short bound.
``termination_verified`` is true only when all of it happened; a failed wait is never verified. The budget bounds the local observation only:
a remote query the worker started may keep running on the server, and writes by others are not bounded.

**Answers.** Exactly one newline-terminated canonical frame, at most the plan's worst-case size, with the
request's nonce, answering this exact plan, followed by EOF and exit status 0. A larger, malformed,
doubled (anything after the first newline) or wrong-nonce frame, or an unclean exit, is ``rejected``.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import airflow_provider_dpone
from airflow_provider_dpone.adapters.target_reader.protocol import (
    PROBE_FRAME_MAX_BYTES,
    REQUEST_FRAME_MAX_BYTES,
    EndpointFrame,
    ProbeReadyFrame,
    WorkerRequestFrame,
    new_nonce,
)
from airflow_provider_dpone.contracts.capsule import (
    RESPONSE_FRAME_MAX_BYTES,
    CapsuleInvalid,
    parse_model,
    worst_case_frame_bytes,
)
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.target_observation import (
    OBSERVATION_BUDGET_S,
    SHUTDOWN_BOUND_S,
    ObservationInterrupted,
    ObservationInvalid,
    ReaderOutcome,
    ReaderOutcomeKind,
    ReaderReason,
    ReaderResponseFrame,
    TargetObservation,
    TargetReadRequest,
)

if TYPE_CHECKING:
    from airflow_provider_dpone.ports.target_reader import TargetMetricsReader

WORKER_MODULE = "airflow_provider_dpone.adapters.target_reader.worker"
#: Budget of the preflight probe (start a worker, get its ready frame); kill and reap are bounded apart.
PROBE_BUDGET_S = 30.0

#: Only these variables reach the worker (plus LC_*); anything else, and any value that looks like a
#: URL with credentials, is dropped.
_ENV_ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "SYSTEMROOT",
        # where the TLS trust store is (OpenSSL reads them): a server whose CA is trusted this way refused
        # every observation, after the load had published through the sink, which honours them
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)
_SECRET_NAME_RE = re.compile(
    r"PASS|SECRET|TOKEN|KEY|CRED|AUTH|CONN|DSN|COOKIE|SESSION|PRIVATE", re.IGNORECASE
)
_CREDENTIAL_URL_RE = re.compile(r"://[^/@\s]*:[^/@\s]*@")
_WORKER_ERROR_REASONS = {reason.value: reason for reason in ReaderReason}


def _proxy_for(endpoint: EndpointDescriptor) -> str | None:
    """The proxy the environment names for a server endpoint, as the sink picks it (None: direct, chDB)."""
    if endpoint.interface is not ClickHouseInterface.HTTP or not endpoint.host:
        return None
    from airflow_provider_dpone.adapters.clickhouse.readonly_pool import env_proxy

    port = endpoint.port or (8443 if endpoint.secure else 8123)
    return env_proxy(secure=endpoint.secure, host=endpoint.host, port=port)


def child_environment(extra_paths: Sequence[str] = (), *, secrets: Sequence[str] = ()) -> dict[str, str]:
    """The worker's whole environment: an allow-list, minus anything secret-looking.

    A source checkout's root is put on PYTHONPATH so the worker runs the same code as its parent (an
    installed package is found through site-packages already; putting that ahead of the standard library
    could shadow it).
    """
    env: dict[str, str] = {}
    for name, value in os.environ.items():
        if name not in _ENV_ALLOWED and not name.startswith("LC_"):
            continue
        if _SECRET_NAME_RE.search(name) or _CREDENTIAL_URL_RE.search(value):
            continue
        if any(secret and secret in value for secret in secrets):
            continue
        env[name] = value
    package_root = Path(airflow_provider_dpone.__file__).resolve().parent.parent
    own = [] if package_root.name in ("site-packages", "dist-packages") else [str(package_root)]
    paths = [*extra_paths, *own, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    else:
        env.pop("PYTHONPATH", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


#: Workers of this process not yet killed by their observing call, so a stop request can kill them now.
_LIVE_WORKERS: set[_Child] = set()


def kill_live_workers() -> None:
    """SIGKILL the group of every live worker (safe in a signal handler); the observing call reaps it.

    For a stopped task (Airflow's on_kill): the observation ends at once as a failed one, its reader guard
    handling unchanged, instead of running out its budget while the task is being killed."""
    for child in list(_LIVE_WORKERS):
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)  # unreaped leader: the group ID is still its own


def posix_supervision_available() -> bool:
    return os.name == "posix" and all(hasattr(os, name) for name in ("killpg", "waitid", "setsid"))


@dataclass
class _Exchange:
    """What one child sent back within the deadline."""

    frame: bytes | None = None
    reason: ReaderReason | None = None  # set when the exchange itself failed
    exited: bool = False
    exit_ok: bool = False


#: Set in every worker's environment to a fresh random value; descendants inherit it, so one that left
#: the worker's process group and session (``setsid``) is still found and killed by PID.
INSTANCE_VARIABLE = "DPONE_READER_INSTANCE"
_PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields after the command name of /proc/PID/stat (state, ppid, pgrp, session, ...)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _pids() -> list[int]:
    try:
        return [int(entry.name) for entry in _PROC.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def descendants(leader: int, marker: bytes, *, tree: bool = True) -> set[int]:
    """Live (non-zombie) processes of one worker: anything carrying its instance marker in its
    environment and, while the leader is unreaped (its PID cannot be recycled), its group, session and
    the parent-PID tree under it."""
    table: dict[int, tuple[int, int, int]] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 4 or fields[0] in ("Z", "X"):
            continue
        table[pid] = (int(fields[1]), int(fields[2]), int(fields[3]))
    found = {pid for pid, (_, pgrp, sid) in table.items() if tree and leader in (pgrp, sid)}
    grew = tree
    while grew:
        before = len(found)
        found |= {pid for pid, (ppid, _, _) in table.items() if ppid in found or ppid == leader}
        grew = len(found) != before
    for pid in table.keys() - found:
        try:
            environ = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.add(pid)
    found.discard(os.getpid())
    return found


def _kill_pid(pid: int) -> bool:
    """SIGKILL one PID through a pidfd (no recycled-PID race); True when it is gone or dying."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


class _Child:
    """One supervised worker process and its pipes."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.marker = f"{INSTANCE_VARIABLE}={secrets.token_hex(16)}".encode()
        environment = dict(env)
        environment[INSTANCE_VARIABLE] = self.marker.decode().split("=", 1)[1]
        environment["DPONE_READER_PARENT"] = str(os.getpid())  # the worker exits if re-parented early
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environment,
            cwd="/",
            close_fds=True,
            start_new_session=True,
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdout = self.proc.stdout
        os.set_blocking(self.stdin.fileno(), False)
        os.set_blocking(self.stdout.fileno(), False)
        _LIVE_WORKERS.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exit_status(self) -> int | None:
        """The exit status if the child has exited — WITHOUT reaping it (its PID must keep the group)."""
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is None or info.si_pid == 0:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def wait_exit(self, deadline: float, result: _Exchange) -> int | None:
        """Wait (without reaping) for the exit by ``deadline``; None with ``result.reason`` set otherwise.

        A wait that fails (``ChildProcessError``: the child was reaped behind our back, as under an
        inherited ``SIGCHLD=SIG_IGN``) is a typed reason, never an exception.
        """
        while True:
            try:
                status = self.exit_status()
            except ChildProcessError:
                result.reason = ReaderReason.WAIT_FAILED
                return None
            if status is not None:
                return status
            if time.monotonic() >= deadline:
                result.reason = ReaderReason.BUDGET_EXHAUSTED
                return None
            time.sleep(0.005)

    def finish_probe(self, deadline: float) -> _Exchange:
        """After a probe's ready frame: close its stdin and wait for its exit 0 on the observation's exact
        wait path (``waitid`` without reaping), so the preflight proves what ``observe`` relies on."""
        result = _Exchange()
        with contextlib.suppress(OSError):
            self.stdin.close()
        status = self.wait_exit(deadline, result)
        if status is not None:
            result.exited, result.exit_ok = True, status == 0
        return result

    def exchange(
        self, request: bytes, deadline: float, limit: int, *, keep_stdin_open: bool = False
    ) -> _Exchange:
        """Write ``request``, read one frame of at most ``limit`` bytes, then EOF and exit, by ``deadline``."""
        result = _Exchange()
        pending = memoryview(request)
        data = bytearray()
        eof = False
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdout, selectors.EVENT_READ)
            selector.register(self.stdin, selectors.EVENT_WRITE)
            writing = True
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    result.reason = ReaderReason.BUDGET_EXHAUSTED
                    return result
                if eof and not writing:
                    break
                for key, _ in selector.select(remaining):
                    if key.fileobj is self.stdin:
                        try:
                            pending = pending[os.write(self.stdin.fileno(), pending) :]
                        except (BrokenPipeError, ConnectionResetError):
                            pending = pending[len(pending) :]  # the child is gone; its output decides
                        if not pending:
                            selector.unregister(self.stdin)
                            writing = False
                            if not keep_stdin_open:
                                self.stdin.close()
                    else:
                        try:
                            chunk = os.read(self.stdout.fileno(), 65536)
                        except BlockingIOError:
                            continue
                        if not chunk:
                            eof = True
                            selector.unregister(self.stdout)
                            continue
                        data += chunk
                        newline = data.find(b"\n")
                        if newline < 0 and len(data) >= limit:
                            result.reason = ReaderReason.FRAME_OVERSIZED
                            return result
                        if newline >= 0 and newline + 1 > limit:
                            result.reason = ReaderReason.FRAME_OVERSIZED
                            return result
                        if newline >= 0 and len(data) > newline + 1:
                            result.reason = ReaderReason.FRAME_DOUBLED
                            return result
                        if newline >= 0 and keep_stdin_open:
                            result.frame = bytes(data[:newline])
                            return result  # a probe stays alive until it is killed
        status = self.wait_exit(deadline, result)
        if status is None:
            return result
        result.exited, result.exit_ok = True, status == 0
        if not data:
            result.reason = ReaderReason.NO_FRAME
        elif not data.endswith(b"\n"):
            result.reason = ReaderReason.FRAME_MALFORMED
        else:
            result.frame = bytes(data[:-1])
        return result

    def terminate(self, bound_s: float) -> bool:
        """SIGKILL the group and every descendant, reap the leader, prove none is left; True only if all
        of it happened within ``bound_s``.

        The group alone is not enough: a descendant that called ``setsid`` left it. Descendants are found
        by the parent-PID tree and by the worker's instance marker, which survives ``setsid`` and the
        worker's own exit (its orphans are re-parented away from it).
        """
        deadline = time.monotonic() + bound_s
        _LIVE_WORKERS.discard(self)  # before the reap: a reaped PID's group ID may be reused
        for stream in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        verified = True
        if self.proc.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)  # the unreaped leader still holds the group ID
            except ProcessLookupError:
                pass
            except PermissionError:
                verified = False
        while True:
            left = descendants(self.pid, self.marker, tree=self.proc.returncode is None) - {self.pid}
            for pid in left:
                verified = _kill_pid(pid) and verified
            if self.proc.returncode is None and not self._reap():
                return False  # reaped behind our back (SIGCHLD ignored): its lifecycle is unknown
            group_gone = self._group_gone()
            if group_gone is None:
                return False
            if self.proc.returncode is not None and group_gone and not left:
                return verified
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def _reap(self) -> bool:
        """One non-blocking reap of the leader by its PID; False when the wait itself failed.

        ``os.waitpid`` directly: ``Popen.wait`` reports a child it cannot wait for as exit 0.
        """
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.proc.returncode = -1  # nothing is left to wait for; Popen must not try again
            return False
        if pid == self.pid:
            self.proc.returncode = os.waitstatus_to_exitcode(status)
        return True

    def _group_gone(self) -> bool | None:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return None
        return False


class SupervisedTargetReader:
    """``TargetMetricsReader`` backed by a supervised worker process (POSIX only).

    ``worker_module`` and ``worker_path`` exist for tests, which substitute misbehaving workers; production
    code uses the defaults (the fixed worker, no extra import path).
    """

    def __init__(
        self,
        *,
        worker_module: str = WORKER_MODULE,
        worker_path: Sequence[str] = (),
        shutdown_bound_s: float = SHUTDOWN_BOUND_S,
        probe_budget_s: float = PROBE_BUDGET_S,
    ) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", worker_module):
            raise ValueError("worker_module must be a dotted module name")
        self._argv = (sys.executable, "-m", worker_module)
        self._worker_path = tuple(worker_path)
        self._shutdown_bound_s = shutdown_bound_s
        self._probe_budget_s = probe_budget_s

    # -- preflight -------------------------------------------------------------------------------------

    def prove_spawn_capability(self) -> None:
        """Spawn a worker in probe mode, check it leads its own group, SIGKILL the group, reap, verify."""
        if not posix_supervision_available():
            raise self._unsupported("this platform cannot supervise a reader worker (POSIX only)", "platform")
        if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
            raise self._unsupported(
                "SIGCHLD is ignored in this process, so a reader worker cannot be waited for",
                "sigchld_ignored",
            )
        nonce = new_nonce()
        frame = WorkerRequestFrame(mode="probe", nonce=nonce, budget_ms=int(self._probe_budget_s * 1000))
        deadline = time.monotonic() + self._probe_budget_s
        try:
            child = _Child(self._argv, child_environment(self._worker_path))
        except OSError as exc:
            raise self._unsupported("a reader worker could not be started", "spawn_failed") from exc
        try:
            own_group = os.getpgid(child.pid) == child.pid
            exchanged = child.exchange(frame.encode(), deadline, PROBE_FRAME_MAX_BYTES, keep_stdin_open=True)
            finished = child.finish_probe(deadline) if exchanged.frame is not None else None
        finally:
            verified = child.terminate(self._shutdown_bound_s)
        if not own_group:
            raise self._unsupported("a reader worker did not get its own process group", "process_group")
        if exchanged.frame is None:
            reason = exchanged.reason.value if exchanged.reason else "no_frame"
            raise self._unsupported("a probe worker did not answer within its budget", reason)
        try:
            ready = parse_model(ProbeReadyFrame, exchanged.frame, max_bytes=PROBE_FRAME_MAX_BYTES)
        except CapsuleInvalid:
            raise self._unsupported(
                "a probe worker answered with a malformed frame", "frame_malformed"
            ) from None
        if ready.nonce != nonce:
            raise self._unsupported("a probe worker answered with the wrong nonce", "nonce_mismatch")
        if finished is None or not finished.exit_ok:
            reason = finished.reason.value if finished is not None and finished.reason else "probe_exit"
            raise self._unsupported("a probe worker's exit could not be waited for", reason)
        if not verified:
            raise self._unsupported("a probe worker could not be killed and reaped in time", "termination")

    @staticmethod
    def _unsupported(message: str, reason: str) -> DponeError:
        return DponeError(ErrorCode.TARGET_READER_UNSUPPORTED, message, details={"reason": reason})

    # -- observation -----------------------------------------------------------------------------------

    def observe(
        self, endpoint: EndpointDescriptor, request: TargetReadRequest, budget_s: float = OBSERVATION_BUDGET_S
    ) -> ReaderOutcome:
        started = time.monotonic()
        deadline = started + budget_s
        frame_limit = self._admit(endpoint, request, budget_s)
        nonce = new_nonce()
        path = os.path.abspath(endpoint.path) if endpoint.path else None
        proxy = _proxy_for(endpoint)
        request_bytes = WorkerRequestFrame(
            mode="observe",
            nonce=nonce,
            budget_ms=max(1, int(budget_s * 1000)),
            endpoint=EndpointFrame.of(endpoint, resolved_path=path, proxy=proxy),
            request=request,
        ).encode()
        if len(request_bytes) > REQUEST_FRAME_MAX_BYTES:
            raise DponeError(
                ErrorCode.CAPSULE_CAPACITY_EXCEEDED,
                "the reader request frame exceeds its size limit",
                details={"frame_bytes": len(request_bytes), "limit_bytes": REQUEST_FRAME_MAX_BYTES},
            )
        hidden = [s for s in (endpoint.secret(), proxy) if s]
        if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:  # a worker could not be waited for
            return ReaderOutcome(
                kind=ReaderOutcomeKind.WORKER_FAILED,
                reason=ReaderReason.WAIT_FAILED,
                termination_verified=True,  # nothing was spawned
                elapsed_seconds=time.monotonic() - started,
            )
        try:
            child = _Child(self._argv, child_environment(self._worker_path, secrets=hidden))
        except OSError:
            return ReaderOutcome(
                kind=ReaderOutcomeKind.WORKER_FAILED,
                reason=ReaderReason.SPAWN_FAILED,
                termination_verified=True,
                elapsed_seconds=time.monotonic() - started,
            )
        try:
            exchanged = child.exchange(request_bytes, deadline, frame_limit)
        except (ChildProcessError, OSError):
            exchanged = _Exchange(reason=ReaderReason.WAIT_FAILED)
        except BaseException as interrupt:  # SIGINT/SIGTERM in the owner: kill and reap first, then say so
            stopped = self._stop(child)
            raise ObservationInterrupted(
                interrupt, termination_verified=stopped, worker_pid=child.pid
            ) from interrupt
        verified = self._stop(child)
        kind, reason, observation = self._judge(exchanged, nonce, request, frame_limit)
        return ReaderOutcome(
            kind=kind,
            reason=reason,
            observation=observation,
            termination_verified=verified,
            elapsed_seconds=time.monotonic() - started,
            worker_pid=child.pid,
        )

    def _stop(self, child: _Child) -> bool:
        try:
            return child.terminate(self._shutdown_bound_s)
        except (ChildProcessError, OSError):
            return False

    def _admit(self, endpoint: EndpointDescriptor, request: TargetReadRequest, budget_s: float) -> int:
        """Checks made before any process or target I/O; returns the response frame limit."""
        if not posix_supervision_available():
            raise self._unsupported("this platform cannot supervise a reader worker (POSIX only)", "platform")
        if endpoint.kind is not EndpointKind.CLICKHOUSE or endpoint.interface not in (
            ClickHouseInterface.HTTP,
            ClickHouseInterface.CHDB,
        ):
            raise DponeError(
                ErrorCode.CONNECTION_INVALID,
                "the target reader needs a ClickHouse endpoint (http or chdb)",
                details={"endpoint": endpoint.describe()},
            )
        if not budget_s > 0:
            raise ValueError("budget_s must be positive")
        limit = worst_case_frame_bytes(request)
        if limit > RESPONSE_FRAME_MAX_BYTES:
            raise DponeError(
                ErrorCode.CAPSULE_CAPACITY_EXCEEDED,
                "the plan's worst-case reader response exceeds the frame size limit",
                details={"worst_case_bytes": limit, "limit_bytes": RESPONSE_FRAME_MAX_BYTES},
            )
        return limit

    @staticmethod
    def _judge(
        exchanged: _Exchange, nonce: str, request: TargetReadRequest, frame_limit: int
    ) -> tuple[ReaderOutcomeKind, ReaderReason, TargetObservation | None]:
        if exchanged.reason is ReaderReason.BUDGET_EXHAUSTED:
            return ReaderOutcomeKind.TIMEOUT, ReaderReason.BUDGET_EXHAUSTED, None
        if exchanged.reason in (ReaderReason.NO_FRAME, ReaderReason.WAIT_FAILED):
            return ReaderOutcomeKind.WORKER_FAILED, exchanged.reason, None
        if exchanged.reason is not None:
            return ReaderOutcomeKind.REJECTED, exchanged.reason, None
        assert exchanged.frame is not None
        try:
            frame = parse_model(ReaderResponseFrame, exchanged.frame, max_bytes=frame_limit)
        except CapsuleInvalid:
            return ReaderOutcomeKind.REJECTED, ReaderReason.FRAME_MALFORMED, None
        if frame.nonce != nonce:
            return ReaderOutcomeKind.REJECTED, ReaderReason.NONCE_MISMATCH, None
        if not exchanged.exit_ok:
            return ReaderOutcomeKind.REJECTED, ReaderReason.UNCLEAN_EXIT, None
        if frame.error is not None:
            return ReaderOutcomeKind.WORKER_FAILED, _WORKER_ERROR_REASONS[frame.error.value], None
        assert frame.observation is not None
        try:
            frame.observation.check_answers(request)
        except ObservationInvalid:
            return ReaderOutcomeKind.REJECTED, ReaderReason.PLAN_MISMATCH, None
        return ReaderOutcomeKind.COMPLETE, ReaderReason.OBSERVED, frame.observation


if TYPE_CHECKING:

    def _conforms(reader: SupervisedTargetReader) -> TargetMetricsReader:
        return reader
