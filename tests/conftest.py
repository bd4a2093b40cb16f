"""Shared fixtures: real services on loopback, never mocks.

``scripts/test.sh`` starts PostgreSQL 15, ClickHouse 18.16 and the TDS emulator once and exports their
coordinates as ``DPONE_TEST_*`` variables; these fixtures read them. When a variable is missing (a test file
run directly) the fixture starts that service itself, lazily and once per session, and stops it at the end
(``DPONE_TEST_AUTOSTART=0`` turns that off; test.sh does). A service that is still unavailable fails the
test, or skips it when the run is explicitly local: ``DPONE_ALLOW_SKIP=1``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest
from pydantic import SecretStr

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVICES_DIR = REPO_ROOT / "scripts" / "services"

# helpers that moved out of test modules into these rigs keep pytest's detailed assertion messages
pytest.register_assert_rewrite(
    "tests.airflow.retry_rig",
    "tests.integration.chdb_sink_rig",
    "tests.integration.route_rig",
    "tests.integration.sqlite_arrow_read_rig",
    "tests.integration.sqlite_audit_rig",
    "tests.integration.target_reader_rig",
)


def _load_module(name: str, path: Path) -> ModuleType:
    """Import a helper from scripts/services/ without putting that folder on sys.path."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


local_services = _load_module("dpone_local_services", SERVICES_DIR / "local_services.py")
tds_emulator_data = _load_module("dpone_tds_emulator", SERVICES_DIR / "tds_emulator.py")


def _skip_allowed() -> bool:
    return os.environ.get("DPONE_ALLOW_SKIP", "") == "1"


def _autostart_allowed() -> bool:
    return os.environ.get("DPONE_TEST_AUTOSTART", "1") != "0"


def _unavailable(what: str, why: str) -> NoReturn:
    message = (
        f"{what} is not available: {why}. Run the suite with scripts/test.sh (it starts every service), "
        "or set DPONE_ALLOW_SKIP=1 to skip service tests on a local run."
    )
    if _skip_allowed():
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


class _LazyServices:
    """Services this pytest process started itself because test.sh did not; stopped at session end."""

    def __init__(self) -> None:
        self._root: Path | None = None
        self._started: dict[str, Any] = {}
        self._errors: dict[str, str] = {}

    def root(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="dpone-lazy-services-"))
        return self._root

    def env(self, kind: str) -> dict[str, str]:
        """The DPONE_TEST_* variables of ``kind``, starting it on first use (a failure is remembered)."""
        if kind in self._errors:
            raise RuntimeError(self._errors[kind])
        if kind not in self._started:
            try:
                self._started[kind] = local_services.start(kind, self.root())
            except Exception as exc:
                self._errors[kind] = str(exc)
                raise RuntimeError(str(exc)) from exc
        return dict(self._started[kind].env)

    def stop_all(self) -> None:
        for started in reversed(list(self._started.values())):
            local_services.stop(started)
        self._started.clear()
        if self._root is not None:
            import shutil

            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None


@pytest.fixture(scope="session")
def _lazy_services() -> Iterator[_LazyServices]:
    services = _LazyServices()
    try:
        yield services
    finally:
        services.stop_all()


def _service_env(lazy: _LazyServices, kind: str, what: str, required: tuple[str, ...]) -> dict[str, str]:
    """The exported DPONE_TEST_* coordinates of a service, or a lazily started one's, or fail/skip."""
    if all(name in os.environ for name in required):
        return {k: v for k, v in os.environ.items() if k.startswith("DPONE_TEST_")}
    missing = ", ".join(name for name in required if name not in os.environ)
    if not _autostart_allowed():
        _unavailable(what, f"{missing} not set and DPONE_TEST_AUTOSTART=0")
    try:
        return lazy.env(kind)
    except RuntimeError as exc:
        _unavailable(what, f"{missing} not set and starting it here failed: {exc}")


@pytest.fixture(scope="session")
def postgres_url(_lazy_services: _LazyServices) -> str:
    """SQLAlchemy URL (postgresql+psycopg2) of a throwaway PostgreSQL 15 cluster; use your own schema."""
    env = _service_env(_lazy_services, "postgres", "PostgreSQL", ("DPONE_TEST_PG_URL",))
    return env["DPONE_TEST_PG_URL"]


def _clickhouse_endpoint(env: dict[str, str], name: str = "clickhouse_test") -> EndpointDescriptor:
    password = env.get("DPONE_TEST_CH_PASSWORD") or None
    return EndpointDescriptor(
        name=name,
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.HTTP,
        host=env["DPONE_TEST_CH_HOST"],
        port=int(env["DPONE_TEST_CH_PORT"]),
        user=env.get("DPONE_TEST_CH_USER") or "default",
        password=SecretStr(password) if password else None,
        database="default",
    )


@pytest.fixture(scope="session")
def clickhouse_http(_lazy_services: _LazyServices) -> EndpointDescriptor:
    """A running Debian clickhouse-server 18.16 on loopback (HTTP interface), shared by the session."""
    env = _service_env(
        _lazy_services, "clickhouse", "ClickHouse server", ("DPONE_TEST_CH_HOST", "DPONE_TEST_CH_PORT")
    )
    return _clickhouse_endpoint(env)


@pytest.fixture
def chdb_dir(tmp_path: Path) -> Path:
    """A fresh directory for an embedded chDB database. Close every client on it before the test ends."""
    path = tmp_path / "chdb"
    path.mkdir()
    return path


@pytest.fixture
def mimalloc_pool() -> Iterator[None]:
    """Arrow's own default pool (mimalloc) for the test, whatever an earlier run switched it to (a run makes
    the system allocator the default: adapters/arrow_memory.py); the pool before is restored after."""
    import pyarrow as pa

    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    yield
    pa.set_memory_pool(before)


@pytest.fixture(scope="session")
def tds_emulator(_lazy_services: _LazyServices) -> EndpointDescriptor:
    """A pysqlbridge TDS emulator that pymssql logs in to, serving ``dbo.orders`` (see ``tds_orders``)."""
    required = (
        "DPONE_TEST_TDS_HOST",
        "DPONE_TEST_TDS_PORT",
        "DPONE_TEST_TDS_USER",
        "DPONE_TEST_TDS_PASSWORD",
    )
    env = _service_env(_lazy_services, "tds", "TDS emulator", required)
    return EndpointDescriptor(
        name="mssql_test",
        kind=EndpointKind.MSSQL,
        host=env["DPONE_TEST_TDS_HOST"],
        port=int(env["DPONE_TEST_TDS_PORT"]),
        user=env["DPONE_TEST_TDS_USER"],
        password=SecretStr(env["DPONE_TEST_TDS_PASSWORD"]),
        database=env.get("DPONE_TEST_TDS_DATABASE") or tds_emulator_data.DATABASE,
    )


@pytest.fixture(scope="session")
def tds_orders() -> list[dict[str, Any]]:
    """The rows the emulator serves in dbo.orders, as SQL Server would hold them (Decimal, date).

    Over the wire the emulator sends amount as float and order_date/updated_at as datetime.
    """
    rows: list[dict[str, Any]] = tds_emulator_data.orders_rows()
    return rows


class PrivateClickHouse:
    """A clickhouse-server of one test's own, for fault tests (kill it mid-insert, refuse connections)."""

    def __init__(self, started: Any) -> None:
        self._started = started
        self.endpoint = _clickhouse_endpoint(started.env, name="clickhouse_private")
        self.pid: int = started.pid

    def kill(self) -> None:
        """SIGKILL the server now (no graceful shutdown)."""
        import signal

        os.kill(self.pid, signal.SIGKILL)

    def stop(self) -> None:
        local_services.stop(self._started)


@pytest.fixture
def private_clickhouse(tmp_path: Path) -> Iterator[PrivateClickHouse]:
    """A fresh clickhouse-server 18.16 for this test only (about 0.2 s to start); stopped afterwards.

    It is a server this process starts, so ``DPONE_TEST_AUTOSTART=0`` forbids it too, unless
    ``DPONE_TEST_PRIVATE_CLICKHOUSE=1`` allows private servers (scripts/test.sh sets both).
    """
    if not _autostart_allowed() and os.environ.get("DPONE_TEST_PRIVATE_CLICKHOUSE") != "1":
        _unavailable(
            "A private ClickHouse server",
            "DPONE_TEST_AUTOSTART=0 forbids starting one (DPONE_TEST_PRIVATE_CLICKHOUSE=1 allows it)",
        )
    try:
        started = local_services.start("clickhouse", tmp_path / "private-clickhouse")
    except Exception as exc:
        _unavailable("ClickHouse server", f"starting a private one failed: {exc}")
    server = PrivateClickHouse(started)
    try:
        yield server
    finally:
        server.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many threads the test process ends with: every chDB folder a test opens leaves ~30 in it, and
    chDB refuses work past 10,000 ("no free thread"); scripts/test.sh splits the suites over two processes
    for that. The line says how much room is left before a suite added to this process fails for it."""
    task_dir = Path(f"/proc/{os.getpid()}/task")
    if task_dir.is_dir():
        threads = len(list(task_dir.iterdir()))
        terminalreporter.write_line(
            f"threads in this test process at the end: {threads:,} (chDB stops at 10,000)"
        )
