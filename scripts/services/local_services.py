"""Throwaway real services on loopback for the test suite: PostgreSQL 15, ClickHouse 18.16, a TDS emulator.

Two callers share this one implementation:
- ``scripts/test.sh`` runs ``python local_services.py up --dir D`` (services are left running, detached, and
  their coordinates written to ``D/env.sh`` as ``DPONE_TEST_*`` exports), later ``down --dir D``;
- ``tests/conftest.py`` imports it to start a missing service lazily when a test file is run directly.

Everything lives in one temp dir per service (data, config, logs), listens on 127.0.0.1 only, on a free
port, and is removed on stop. PostgreSQL refuses to run as root, so as root it runs as the ``postgres``
user (``runuser``) with its dir owned by that user.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOPBACK = "127.0.0.1"
PG_PASSWORD = "dpone-pg-test-pw"  # throwaway cluster, loopback only
KINDS = ("postgres", "clickhouse", "tds")
START_TIMEOUT_S = 60.0


class ServiceError(RuntimeError):
    """A service could not be started or stopped; the message says which and points at its log."""


@dataclass
class Started:
    """A running service: how to reach it (``env``) and how to stop it (``pid`` / ``workdir``)."""

    kind: str
    workdir: str
    log: str
    env: dict[str, str]
    pid: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


# --- helpers ----------------------------------------------------------------------------------------------


def free_port() -> int:
    """A port the kernel just handed out on loopback (free now; callers retry if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def port_open(port: int, host: str = LOOPBACK) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def log_tail(path: str | Path, lines: int = 25) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def terminate(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL: the process is gone when this returns."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)


def _spawn(cmd: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """Start a detached server process (own session, so a Ctrl-C in the terminal is handled by our stop)."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )


def _make_workdir(root: Path, kind: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    # Other users (postgres) must be able to traverse into their own subdir.
    os.chmod(root, 0o711)
    workdir = Path(os.path.realpath(root)) / kind
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir()
    return workdir


# --- PostgreSQL -------------------------------------------------------------------------------------------


def pg_bindir() -> Path:
    """The PostgreSQL server binaries: $DPONE_PG_BINDIR, else 15, else the newest installed, else PATH."""
    if os.environ.get("DPONE_PG_BINDIR"):
        return Path(os.environ["DPONE_PG_BINDIR"])
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    preferred = [c for c in candidates if Path(c).parts[-3] == "15"]
    if preferred or candidates:
        return Path((preferred or candidates)[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise ServiceError("PostgreSQL server binaries not found (apt-get install postgresql)")


def _pg_prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise ServiceError("running as root but there is no 'postgres' user to run PostgreSQL as") from exc
    return ["runuser", "-u", "postgres", "--"]


def _chown_postgres(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, user="postgres", group="postgres")


def _run(cmd: list[str], cwd: Path, log: Path, what: str, timeout: float = 120) -> None:
    with open(log, "ab") as out:
        proc = subprocess.run(
            cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=timeout
        )
    if proc.returncode != 0:
        raise ServiceError(f"{what} failed (exit {proc.returncode}); log {log}:\n{log_tail(log)}")


def start_postgres(root: Path, attempts: int = 3) -> Started:
    bindir = pg_bindir()
    prefix = _pg_prefix()
    workdir = _make_workdir(root, "postgres")
    _chown_postgres(workdir)
    data, sock, log = workdir / "data", workdir / "sock", workdir / "postgres.log"
    sock.mkdir()
    _chown_postgres(sock)
    pwfile = workdir / "pwfile"
    pwfile.write_text(PG_PASSWORD + "\n")
    _chown_postgres(pwfile)
    log.touch()
    _chown_postgres(log)
    _run(
        [
            *prefix,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--pwfile",
            str(pwfile),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        workdir,
        log,
        "initdb",
    )
    pwfile.unlink()
    for attempt in range(attempts):
        port = free_port()
        opts = (
            f"-p {port} -c listen_addresses={LOOPBACK} -c unix_socket_directories={sock} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        cmd = [
            *prefix,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log),
            "-w",
            "-t",
            "60",
            "-o",
            opts,
            "start",
        ]
        try:
            _run(cmd, workdir, workdir / "pg_ctl.log", "pg_ctl start")
        except ServiceError:
            if attempt + 1 < attempts and "already in use" in log_tail(log, 10):
                continue
            raise ServiceError(f"PostgreSQL did not start; log {log}:\n{log_tail(log)}") from None
        version = subprocess.run(
            [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        url = f"postgresql+psycopg2://postgres:{PG_PASSWORD}@{LOOPBACK}:{port}/postgres"
        return Started(
            kind="postgres",
            workdir=str(workdir),
            log=str(log),
            env={"DPONE_TEST_PG_URL": url},
            extra={"bindir": str(bindir), "data": str(data), "port": str(port), "version": version},
        )
    raise ServiceError("PostgreSQL did not start")  # pragma: no cover - loop always returns or raises


def stop_postgres(s: Started) -> None:
    data = Path(s.extra["data"])
    if not (data / "postmaster.pid").exists():
        return
    with contextlib.suppress(ServiceError, subprocess.TimeoutExpired):
        _run(
            [
                *_pg_prefix(),
                str(Path(s.extra["bindir"]) / "pg_ctl"),
                "-D",
                str(data),
                "-m",
                "immediate",
                "-w",
                "-t",
                "20",
                "stop",
            ],
            Path(s.workdir),
            Path(s.workdir) / "pg_ctl.log",
            "pg_ctl stop",
            30,
        )
    pidfile = data / "postmaster.pid"
    if pidfile.exists():  # pg_ctl could not stop it: kill the postmaster ourselves
        with contextlib.suppress(OSError, ValueError, IndexError):
            terminate(int(pidfile.read_text().splitlines()[0]), grace_s=5)


# --- ClickHouse 18.16 -------------------------------------------------------------------------------------

_CH_CONFIG = """<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><console>1</console></logger>
    <listen_host>{host}</listen_host>
    <http_port>{http_port}</http_port>
    <tcp_port>{tcp_port}</tcp_port>
    <path>{data}/</path>
    <tmp_path>{data}/tmp/</tmp_path>
    <user_files_path>{data}/user_files/</user_files_path>
    <format_schema_path>{data}/format_schemas/</format_schema_path>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
    <keep_alive_timeout>3</keep_alive_timeout>
</yandex>
"""

_CH_USERS = """<?xml version="1.0"?>
<yandex>
    <profiles><default></default></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default></default></quotas>
</yandex>
"""


def clickhouse_command() -> list[str]:
    for name in ("clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"):
        found = shutil.which(name)
        if found:
            return [found]
    found = shutil.which("clickhouse") or (
        ("/usr/bin/clickhouse") if os.path.exists("/usr/bin/clickhouse") else None
    )
    if found:
        return [found, "server"]
    raise ServiceError("clickhouse-server not found (apt-get install clickhouse-server)")


def _http_ok(port: int, path: str = "/ping") -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{path}", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def start_clickhouse(root: Path, attempts: int = 3) -> Started:
    """A private clickhouse-server on loopback: its own config, users, data dir and free HTTP/TCP ports."""
    command = clickhouse_command()
    workdir = _make_workdir(root, "clickhouse")
    data, log = workdir / "data", workdir / "clickhouse.log"
    data.mkdir()
    (workdir / "users.xml").write_text(_CH_USERS)
    for attempt in range(attempts):
        http_port, tcp_port = free_port(), free_port()
        while tcp_port == http_port:
            tcp_port = free_port()
        config = workdir / "config.xml"
        config.write_text(_CH_CONFIG.format(host=LOOPBACK, http_port=http_port, tcp_port=tcp_port, data=data))
        proc = _spawn([*command, f"--config-file={config}"], log, workdir)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if _http_ok(http_port):
                version = _clickhouse_version(http_port)
                return Started(
                    kind="clickhouse",
                    workdir=str(workdir),
                    log=str(log),
                    pid=proc.pid,
                    env={
                        "DPONE_TEST_CH_HOST": LOOPBACK,
                        "DPONE_TEST_CH_PORT": str(http_port),
                        "DPONE_TEST_CH_TCP_PORT": str(tcp_port),
                        "DPONE_TEST_CH_USER": "default",
                        "DPONE_TEST_CH_PASSWORD": "",
                    },
                    extra={"version": version},
                )
            time.sleep(0.1)
        terminate(proc.pid, grace_s=5)
        tail = log_tail(log)
        if attempt + 1 < attempts and ("Address already in use" in tail or "NETWORK_ERROR" in tail):
            continue
        raise ServiceError(f"clickhouse-server did not answer /ping; log {log}:\n{tail}")
    raise ServiceError("clickhouse-server did not start")  # pragma: no cover


def _clickhouse_version(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/?query=SELECT%20version()", timeout=5) as r:
            return str(r.read().decode().strip())
    except OSError:
        return "unknown"


def stop_pid(s: Started) -> None:
    if s.pid is not None:
        terminate(s.pid)


# --- TDS emulator (pysqlbridge) ---------------------------------------------------------------------------


def start_tds(root: Path, python: str | None = None) -> Started:
    """The emulator in its own process (see tds_emulator.py); ``python`` must have pysqlbridge installed."""
    sys.path.insert(0, str(HERE))
    try:
        import tds_emulator
    finally:
        sys.path.remove(str(HERE))
    workdir = _make_workdir(root, "tds")
    log, port_file = workdir / "tds.log", workdir / "port"
    cmd = [
        python or sys.executable,
        str(HERE / "tds_emulator.py"),
        "--port-file",
        str(port_file),
        "--verbose",
    ]
    proc = _spawn(cmd, log, workdir)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if port_file.exists():
            port = int(port_file.read_text())
            if port_open(port):
                return Started(
                    kind="tds",
                    workdir=str(workdir),
                    log=str(log),
                    pid=proc.pid,
                    env={
                        "DPONE_TEST_TDS_HOST": LOOPBACK,
                        "DPONE_TEST_TDS_PORT": str(port),
                        "DPONE_TEST_TDS_USER": tds_emulator.USER,
                        "DPONE_TEST_TDS_PASSWORD": tds_emulator.PASSWORD,
                        "DPONE_TEST_TDS_DATABASE": tds_emulator.DATABASE,
                    },
                )
        time.sleep(0.1)
    terminate(proc.pid, grace_s=5)
    raise ServiceError(f"TDS emulator did not start; log {log}:\n{log_tail(log)}")


# --- one entry point for all three ------------------------------------------------------------------------


def start(kind: str, root: Path) -> Started:
    if kind == "postgres":
        return start_postgres(root)
    if kind == "clickhouse":
        return start_clickhouse(root)
    if kind == "tds":
        return start_tds(root)
    raise ValueError(f"unknown service {kind!r}; one of {', '.join(KINDS)}")


def stop(s: Started, remove: bool = True) -> None:
    """Stop a service and (by default) delete its workdir. Never raises for an already-dead service."""
    if s.kind == "postgres":
        stop_postgres(s)
    else:
        stop_pid(s)
    if remove:
        shutil.rmtree(s.workdir, ignore_errors=True)


def _describe(s: Started) -> str:
    where = {
        "postgres": lambda: f"127.0.0.1:{s.extra.get('port')} ({s.extra.get('version', '')})",
        "clickhouse": lambda: (
            f"http 127.0.0.1:{s.env['DPONE_TEST_CH_PORT']} tcp {s.env['DPONE_TEST_CH_TCP_PORT']}"
            f" (version {s.extra.get('version')})"
        ),
        "tds": lambda: f"127.0.0.1:{s.env['DPONE_TEST_TDS_PORT']} (pysqlbridge TDS emulator, dbo.orders)",
    }[s.kind]()
    return f"{s.kind} up on {where}"


def _state_file(root: Path) -> Path:
    return root / "services.json"


def _save(root: Path, started: list[Started]) -> None:
    _state_file(root).write_text(json.dumps([asdict(s) for s in started], indent=2))


def _load(root: Path) -> list[Started]:
    try:
        return [Started(**item) for item in json.loads(_state_file(root).read_text())]
    except (OSError, ValueError):
        return []


def cmd_up(root: Path, kinds: list[str], env_file: Path | None) -> int:
    root.mkdir(parents=True, exist_ok=True)
    started: list[Started] = _load(root)
    failed: list[str] = []
    for kind in kinds:
        t0 = time.monotonic()
        try:
            s = start(kind, root)
        except (ServiceError, OSError, subprocess.SubprocessError) as exc:
            print(f"[services] {kind} FAILED to start: {exc}", file=sys.stderr, flush=True)
            failed.append(kind)
            continue
        started.append(s)
        _save(root, started)  # saved after each, so `down` stops whatever did start
        print(f"[services] {_describe(s)} in {time.monotonic() - t0:.1f}s", flush=True)
    env: dict[str, str] = {}
    for s in started:
        env.update(s.env)
    lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    if env_file is not None:
        env_file.write_text("\n".join(lines) + "\n")
    else:
        print("\n".join(lines))
    return 1 if failed else 0


def cmd_down(root: Path) -> int:
    for s in reversed(_load(root)):
        try:
            stop(s)
        except Exception as exc:  # keep stopping the others
            print(f"[services] could not stop {s.kind}: {exc}", file=sys.stderr)
    with contextlib.suppress(OSError):
        _state_file(root).unlink()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start/stop the test suite's throwaway services.")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start services, print/write DPONE_TEST_* exports")
    up.add_argument("--dir", type=Path, required=True, help="state/work dir for the services")
    up.add_argument("--only", default=",".join(KINDS), help=f"comma list of {', '.join(KINDS)}")
    up.add_argument("--env-file", type=Path, help="write the export lines here instead of stdout")
    down = sub.add_parser("down", help="stop what `up --dir` started")
    down.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "up":
        kinds = [k.strip() for k in args.only.split(",") if k.strip()]
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            parser.error(f"unknown service(s): {', '.join(unknown)}")
        return cmd_up(args.dir, kinds, args.env_file)
    return cmd_down(args.dir)


if __name__ == "__main__":
    raise SystemExit(main())
