"""Private services for one benchmark invocation, started with the test suite's own helpers.

``scripts/services/local_services.py`` starts clickhouse-server 18.16 and a throwaway PostgreSQL 15 on
loopback; the benchmark starts its own instances (never the test suite's, which other runs may be using)
and stops them when it ends. The test cluster runs with ``fsync=off``; for the guard-overhead numbers the
benchmark restarts it with fsync on, so checkpoint commits cost what they cost in production.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
_LOCAL_SERVICES = REPO_ROOT / "scripts" / "services" / "local_services.py"


def local_services() -> ModuleType:
    name = "dpone_local_services"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _LOCAL_SERVICES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class Services:
    root: Path
    started: list[Any] = field(default_factory=list)
    clickhouse_port: int | None = None
    postgres_url: str | None = None  # SQLAlchemy form (postgresql+psycopg2://...)
    durable_postgres: bool = False
    external: bool = False  # services given by the caller (e.g. the test suite's): never restarted or stopped

    @property
    def postgres_dsn(self) -> str | None:
        """The psycopg2 / libpq form of the PostgreSQL URL."""
        return (
            self.postgres_url.replace("postgresql+psycopg2://", "postgresql://")
            if self.postgres_url
            else None
        )

    def start(self, kinds: tuple[str, ...]) -> None:
        services = local_services()
        for kind in kinds:
            started = services.start(kind, self.root)
            self.started.append(started)
            if kind == "clickhouse":
                self.clickhouse_port = int(started.env["DPONE_TEST_CH_PORT"])
            elif kind == "postgres":
                self.postgres_url = started.env["DPONE_TEST_PG_URL"]

    def use_external(self, clickhouse_port: int, postgres_url: str) -> None:
        self.external = True
        self.clickhouse_port = clickhouse_port
        self.postgres_url = postgres_url

    def make_postgres_durable(self) -> None:
        """Restart the cluster with fsync, synchronous_commit and full_page_writes on (production-like).

        Only a cluster this benchmark started itself is restarted; an external one is measured as it is."""
        if self.external:
            return
        services = local_services()
        pg = next((s for s in self.started if s.kind == "postgres"), None)
        if pg is None or self.durable_postgres:
            return
        extra = pg.extra
        sock = Path(pg.workdir) / "sock"
        options = (
            f"-p {extra['port']} -c listen_addresses={services.LOOPBACK} -c unix_socket_directories={sock} "
            "-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=200"
        )
        command = [
            *services._pg_prefix(),
            str(Path(extra["bindir"]) / "pg_ctl"),
            "-D",
            extra["data"],
            "-l",
            pg.log,
            "-w",
            "-t",
            "60",
            "-m",
            "fast",
            "-o",
            options,
            "restart",
        ]
        subprocess.run(command, check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        self.durable_postgres = True

    def stop(self) -> None:
        services = local_services()
        while self.started:
            started = self.started.pop()
            try:
                services.stop(started)
            except Exception as exc:  # keep stopping the others
                print(f"[bench] could not stop {started.kind}: {exc}", file=sys.stderr)


def start_tds_large(services: Services, rows: int, timeout_s: float = 300.0) -> dict[str, Any]:
    """A TDS emulator of this benchmark's own serving ``dbo.large_orders`` with ``rows`` rows
    (``tds_emulator.py --large-rows``); stopped with the other services. Returns how to reach it."""
    import time

    helpers = local_services()
    workdir = helpers._make_workdir(services.root, "tds_large")
    log, port_file = workdir / "tds.log", workdir / "port"
    command = [
        sys.executable,
        str(REPO_ROOT / "scripts" / "services" / "tds_emulator.py"),
        "--port-file",
        str(port_file),
        "--large-rows",
        str(rows),
    ]
    proc = helpers._spawn(command, log, workdir)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if port_file.exists() and helpers.port_open(int(port_file.read_text())):
            port = int(port_file.read_text())
            services.started.append(
                helpers.Started(kind="tds", workdir=str(workdir), log=str(log), pid=proc.pid, env={})
            )
            sys.path.insert(0, str(REPO_ROOT / "scripts" / "services"))
            import tds_emulator

            return {
                "host": helpers.LOOPBACK,
                "port": port,
                "user": tds_emulator.USER,
                "password": tds_emulator.PASSWORD,
                "database": tds_emulator.DATABASE,
            }
        time.sleep(0.2)
    helpers.terminate(proc.pid, grace_s=5)
    raise RuntimeError(f"the large TDS emulator did not start; log {log}")
