"""dpone benchmark harness — one command, see benchmarks/README.md.

    python benchmarks/run.py [--rows N] [--reps R] [--quick]

Generates the sources (demo ``orders`` and a 30-column ``wide`` table, in SQLite and PostgreSQL), starts a
private clickhouse-server 18.16 and PostgreSQL 15 on loopback, then measures, interleaved (every system once
per repetition, in a fixed order, repeated R times; medians reported):

- dpone (lazy_plan + direct, lazy_plan + staged; incremental_append) into chDB and into the server over HTTP,
  each run ``compose.open_runtime(load_manifest(...)).run(run_id)`` in a fresh process, fresh target table;
- the raw pipe (same source read, same insert, nothing else) into both targets;
- the Airflow peers (HTTP only; the ClickHouse provider has no embedded mode): GenericTransfer and the best
  hand-written task with the official hooks; from SQLite and from PostgreSQL;
- the guard's arm + committed promotion for 10/100/1000 partitions on SQLite and PostgreSQL stores;
- the bounded target reader observing the 1M-row generation (start-up included);
- the engine limits (chDB pulling the rows itself; pre-encoded Native in one POST to the server);
- planning with nothing to move over 100k history rows of a route (SQLite and PostgreSQL stores);
- peak RSS of every dpone path into both targets at 1M and 5M rows;
- a checksum of every orders target against its source (a wrong transfer fails the benchmark).

Prints a table, writes ``benchmarks/results/<stamp>.json`` and ``.png``, and prints one JSON summary as the
very last line of stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import checksum  # noqa: E402
import datasets  # noqa: E402
import report  # noqa: E402
import transfer_mssql  # noqa: E402
from services import REPO_ROOT, Services, start_tds_large  # noqa: E402
from spawn import ChildFailed, measure  # noqa: E402
from transfer_dpone import write_manifest  # noqa: E402

RESULTS_DIR = HERE / "results"
#: How rows leave the source on the paths the memory comparison covers.
MEMORY_EXPORTS = ("lazy_plan", "file_artifact")
SUMMARY_KEYS = (
    "dpone_rows_per_s",
    "raw_rows_per_s",
    "generic_transfer_rows_per_s",
    "hand_written_rows_per_s",
    "rows",
    "peak_rss_mb_100k",
    "peak_rss_mb_1m",
    "guard_ms_per_partition_sqlite",
    "guard_ms_per_partition_postgres",
    "reader_seconds",
)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- configuration ---------------------------------------------------------------------------------------


@dataclass
class Config:
    rows: int
    wide_rows: int
    reps: int
    gt_rows: int
    chunk_rows: int
    memory_rows: tuple[int, int]
    scan_history_rows: int
    guard_partitions: tuple[int, ...]
    shapes: tuple[str, ...]
    postgres_peers: tuple[str, ...]
    quick: bool
    workdir: Path
    keep: bool
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    clickhouse_port: int | None = None
    postgres_url: str | None = None
    results_dir: Path = field(default_factory=lambda: RESULTS_DIR)
    dpone_src: Path | None = None
    #: a second dpone tree measured beside every orders dpone run (before/after in one invocation)
    baseline_src: Path | None = None


def parse_args(argv: list[str] | None) -> Config:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=None, help="rows of the orders table (default 1,000,000)")
    parser.add_argument("--wide-rows", type=int, default=None, help="rows of the wide table (default rows/5)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per measurement (default 3)")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition: a smoke check")
    parser.add_argument(
        "--gt-rows",
        type=int,
        default=None,
        help="rows GenericTransfer moves (it inserts one row per request)",
    )
    parser.add_argument("--chunk-rows", type=int, default=50_000, help="chunk size for every system")
    parser.add_argument("--workdir", type=Path, default=None, help="where sources and targets live (temp)")
    parser.add_argument("--keep", action="store_true", help="keep the workdir (sources are reused next time)")
    parser.add_argument(
        "--only",
        default="",
        help="comma list of label substrings: run only matching transfers (e.g. dpone,raw)",
    )
    parser.add_argument(
        "--skip",
        default="",
        help="comma list of parts to skip: timed (the timed transfers), wide, postgres, mssql, guard, scan, reader, "
        "memory",
    )
    parser.add_argument(
        "--memory-rows",
        default="",
        help="the two sizes peak RSS is compared at, e.g. 1000000,5000000 (default; quick: rows,5*rows)",
    )
    parser.add_argument(
        "--clickhouse-port",
        type=int,
        default=None,
        help="use this running clickhouse-server (HTTP port) instead",
    )
    parser.add_argument(
        "--postgres-url", default=None, help="use this PostgreSQL (postgresql+psycopg2:// URL) instead"
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where the JSON and PNG go")
    parser.add_argument(
        "--dpone-src",
        type=Path,
        default=None,
        help="import airflow_provider_dpone from this source tree in the children (before/after comparisons)",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="also run every orders dpone measurement with dpone from this tree, right after it (paired)",
    )
    args = parser.parse_args(argv)
    if (args.clickhouse_port is None) != (args.postgres_url is None):
        parser.error("--clickhouse-port and --postgres-url go together")
    quick = args.quick
    rows = args.rows or (2_000 if quick else 1_000_000)
    memory_rows = (rows, rows * 5) if quick else (1_000_000, 5_000_000)
    if args.memory_rows:
        small, large = (int(n) for n in args.memory_rows.split(","))
        memory_rows = (small, large)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="dpone-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o711)  # PostgreSQL runs as its own user and must reach its folder inside
    return Config(
        rows=rows,
        wide_rows=args.wide_rows or max(1, rows // 5),
        reps=args.reps or (1 if quick else 3),
        gt_rows=min(rows, args.gt_rows or (100 if quick else 2_000)),
        chunk_rows=args.chunk_rows,
        memory_rows=memory_rows,
        scan_history_rows=10_000 if quick else 100_000,
        guard_partitions=(10, 100) if quick else (10, 100, 1000),
        shapes=("orders",) if quick or "wide" in args.skip else ("orders", "wide"),
        postgres_peers=("raw",) if quick else ("raw", "hand_written", "generic_transfer"),
        quick=quick,
        workdir=workdir,
        keep=args.keep or args.workdir is not None,
        only=tuple(p.strip() for p in args.only.split(",") if p.strip()),
        skip=tuple(p.strip() for p in args.skip.split(",") if p.strip()),
        clickhouse_port=args.clickhouse_port,
        postgres_url=args.postgres_url,
        results_dir=args.results_dir,
        dpone_src=args.dpone_src.resolve() if args.dpone_src else None,
        baseline_src=args.baseline_src.resolve() if args.baseline_src else None,
    )


# -- sources and targets ---------------------------------------------------------------------------------


def target_schema(shape: str) -> Any:
    """The ClickHouse schema dpone's SQLite source derives for the shape (its own type mapping)."""
    from airflow_provider_dpone.adapters.sources import sqlite_types
    from airflow_provider_dpone.contracts.schema import TableSchema

    columns = []
    for column in datasets.SHAPES[shape]:
        declared = column.sqlite.replace("PRIMARY KEY", "").replace("NOT NULL", "").strip()
        not_null = "NOT NULL" in column.sqlite or "PRIMARY KEY" in column.sqlite
        columns.append(sqlite_types.column_spec(column.name, declared, not_null))
    return TableSchema(columns=tuple(columns))


def table_ddl(shape: str, table: str) -> str:
    from airflow_provider_dpone.adapters.clickhouse.quoting import TableName
    from airflow_provider_dpone.adapters.clickhouse.table_schema import create_table_sql

    return create_table_sql(
        TableName.parse(table), target_schema(shape), ("order_date", "id"), nullable_key_setting=False
    )


@dataclass
class Measurement:
    """One system/path/source/shape/target combination, measured once per repetition."""

    system: str
    path: str
    source: str
    shape: str
    target: str
    label: str
    spec: Callable[[int], dict[str, Any]]  # rep -> child spec (fresh target prepared by the callable)
    #: the source's checksum the target must hold afterwards (orders shape; see checksum.py)
    reference: dict[str, int] | None = None
    reps: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: the dpone tree the child imports when it is not the harness's (the ``--baseline-src`` tree)
    src: Path | None = None

    def median(self) -> dict[str, Any]:
        if not self.reps:
            return {}

        def med(key: str) -> float | None:
            values = [r[key] for r in self.reps if r.get(key) is not None]
            return statistics.median(values) if values else None

        rows = self.reps[0]["rows"]
        seconds, wall = med("seconds"), med("wall_s")
        return {
            "rows": rows,
            "seconds": seconds,
            "wall_s": wall,
            "cpu_s": med("cpu_s"),
            "cpu_seconds_in_run": med("cpu_seconds"),
            "max_rss_mb": med("max_rss_mb"),
            "rows_per_s": rows / seconds if seconds else None,
            "rows_per_s_e2e": rows / wall if wall else None,
            "rows_per_cpu_s": rows / med("cpu_s") if med("cpu_s") else None,  # type: ignore[operator]
        }


class Bench:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.work = config.workdir
        self.services = Services(self.work / "services")
        self.http_client: Any = None
        self.env = self._child_env(config.dpone_src or REPO_ROOT)
        self.sources: dict[tuple[str, str], Path] = {}
        self.references: dict[str, dict[str, int]] = {}
        self.pg_tables: dict[str, str] = {}
        tag = uuid.uuid4().hex[:8]
        self.ch_db = f"dpone_bench_{tag}"  # one database per invocation, dropped at the end
        self.pg_db = f"dpone_bench_{tag}"
        self.pg_url: str | None = None  # SQLAlchemy URL of the benchmark's own PostgreSQL database
        self.pg_dsn: str | None = None
        self.skipped: list[str] = []
        self.tds: dict[str, Any] | None = None
        self.mssql_reference: dict[str, int] | None = None

    def _child_env(self, dpone_src: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
        env.update(
            TZ="UTC",
            AIRFLOW_HOME=str(self.work / "airflow_home"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            PYTHONDONTWRITEBYTECODE="1",
        )
        python_path = [str(dpone_src), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(python_path))
        return env

    def _env_for(self, src: Path | None) -> dict[str, str]:
        """The children's environment (connections included), importing dpone from ``src`` if given."""
        if src is None:
            return self.env
        own = str(self.config.dpone_src or REPO_ROOT)
        rest = [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p and p != own]
        return {**self.env, "PYTHONPATH": os.pathsep.join([str(src), *rest])}

    # -- setup ---------------------------------------------------------------------------------------

    def start(self) -> None:
        t0 = time.monotonic()
        if self.config.clickhouse_port is not None and self.config.postgres_url is not None:
            self.services.use_external(self.config.clickhouse_port, self.config.postgres_url)
            log(f"using the given clickhouse-server :{self.config.clickhouse_port} and PostgreSQL")
        else:
            self.services.start(("clickhouse", "postgres"))
            log(
                f"services up in {time.monotonic() - t0:.1f}s (clickhouse-server :{self.services.clickhouse_port})"
            )
        import clickhouse_connect

        self.http_client = clickhouse_connect.get_client(
            host="127.0.0.1", port=self.services.clickhouse_port, username="default", compress=False
        )
        self.http_client.command(f"CREATE DATABASE IF NOT EXISTS {self.ch_db}")
        self._create_pg_database()
        self.env["AIRFLOW_CONN_BENCH_CH"] = json.dumps(
            {
                "conn_type": "clickhouse",
                "host": "127.0.0.1",
                "port": self.services.clickhouse_port,
                "login": "default",
                "schema": "default",
                "extra": {"compress": False},
            }
        )
        self.env["AIRFLOW_CONN_BENCH_DPONE_CH"] = (
            f"clickhouse://default@127.0.0.1:{self.services.clickhouse_port}/default"
        )
        assert self.pg_dsn is not None
        self.env["AIRFLOW_CONN_BENCH_PG"] = self.pg_dsn.replace("postgresql://", "postgres://", 1)
        if "mssql" not in self.config.skip:  # the SQL Server source: an emulator of its own (large_orders)
            t0 = time.monotonic()
            self.tds = start_tds_large(self.services, self.config.rows)
            self.mssql_reference = transfer_mssql.reference_checksum(self.config.rows)
            tds = self.tds
            self.env["AIRFLOW_CONN_BENCH_MSSQL"] = (
                f"mssql://{tds['user']}:{tds['password']}@{tds['host']}:{tds['port']}/{tds['database']}"
            )
            log(
                f"TDS emulator with {self.config.rows:,} large_orders rows up in {time.monotonic() - t0:.1f}s"
            )

    def _create_pg_database(self) -> None:
        """A database of its own on the cluster, so nothing here meets another user's tables."""
        from sqlalchemy.engine import make_url

        assert self.services.postgres_url is not None
        self._pg_admin(f"CREATE DATABASE {self.pg_db}")
        own = make_url(self.services.postgres_url).set(database=self.pg_db)
        self.pg_url = own.render_as_string(hide_password=False)
        self.pg_dsn = own.set(drivername="postgresql").render_as_string(hide_password=False)

    def _drop_pg_database(self) -> None:
        if self.pg_url is None or self.services.postgres_url is None:
            return
        self._pg_admin(f"DROP DATABASE IF EXISTS {self.pg_db} WITH (FORCE)")
        for rep in range(self.config.reps):
            self._pg_admin(f"DROP DATABASE IF EXISTS {self.pg_db}_scan{rep} WITH (FORCE)")

    def _fresh_pg_scan_database(self, rep: int) -> str | None:
        """An empty database for one route scan repetition (dropped with the benchmark's own)."""
        from sqlalchemy.engine import make_url

        if self.pg_url is None:
            return None
        name = f"{self.pg_db}_scan{rep}"
        self._pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self._pg_admin(f"CREATE DATABASE {name}")
        return make_url(self.pg_url).set(database=name).render_as_string(hide_password=False)

    def _pg_admin(self, statement: str) -> None:
        import psycopg2
        from sqlalchemy.engine import make_url

        assert self.services.postgres_url is not None
        url = make_url(self.services.postgres_url)
        admin = psycopg2.connect(
            host=url.host, port=url.port, user=url.username, password=url.password, dbname=url.database
        )
        try:
            admin.autocommit = True
            with admin.cursor() as cursor:
                cursor.execute(statement)
        finally:
            admin.close()

    def generate(self) -> None:
        sizes = {("orders", self.config.rows), ("wide", self.config.wide_rows)}
        if "memory" not in self.config.skip:
            sizes |= {("orders", n) for n in self.config.memory_rows}
        for shape, rows in sorted(sizes):
            if shape not in self.config.shapes:
                continue
            t0 = time.monotonic()
            path = datasets.create_sqlite(shape, self.work / "sources" / f"{shape}_{rows}.sqlite", rows)
            self.sources[(shape, str(rows))] = path
            if shape == "orders":
                self.references[str(rows)] = checksum.source_checksum(path)
            self.env[f"AIRFLOW_CONN_BENCH_SQLITE_{shape.upper()}_{rows}"] = json.dumps(
                {"conn_type": "sqlite", "host": str(path)}
            )
            log(f"SQLite {shape} with {rows:,} rows ready in {time.monotonic() - t0:.1f}s")
        assert self.pg_dsn is not None
        for shape in self.config.shapes if "postgres" not in self.config.skip else ():
            rows = self.shape_rows(shape)
            t0 = time.monotonic()
            self.pg_tables[shape] = datasets.create_postgres(shape, self.pg_dsn, rows)
            log(f"PostgreSQL {shape} with {rows:,} rows ready in {time.monotonic() - t0:.1f}s")

    def shape_rows(self, shape: str) -> int:
        return self.config.rows if shape == "orders" else self.config.wide_rows

    # -- measurement specs ---------------------------------------------------------------------------

    def _fresh_chdb(self, label: str) -> Path:
        path = self.work / "chdb" / label
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _fresh_http_table(self, label: str) -> str:
        table = f"{self.ch_db}.{label}"
        self.http_client.command(f"DROP TABLE IF EXISTS {table}")
        return table

    def dpone(
        self, shape: str, rows: int, load: str, target: str, export: str = "lazy_plan", baseline: bool = False
    ) -> Measurement:
        label = ("baseline_" if baseline else "") + f"dpone_{export}_{load}_{shape}_{rows}_{target}"

        def spec(rep: int) -> dict[str, Any]:
            directory = self.work / "manifests" / label
            shutil.rmtree(directory, ignore_errors=True)
            if target == "chdb":
                chdb_path = self._fresh_chdb(label)
                sink = "chdb:////" + str(chdb_path).lstrip("/")
                table = f"bench.{shape}"
                endpoint: dict[str, Any] = {"interface": "chdb", "path": str(chdb_path)}
            else:
                sink = "bench_dpone_ch"
                table = self._fresh_http_table(label)
                endpoint = {"interface": "http", "port": self.services.clickhouse_port}
            manifest = write_manifest(
                directory,
                shape=shape,
                source=self.sources[(shape, str(rows))],
                sink=sink,
                table=table,
                export=export,
                load=load,
                chunk_rows=self.config.chunk_rows,
            )
            return {
                "kind": "dpone",
                "manifest": str(manifest),
                "run_id": f"bench-{rep}",
                "target": target,
                "checksum": {"target": endpoint, "table": table} if shape == "orders" else None,
            }

        path = f"{export} + {load}"
        reference = self.references.get(str(rows)) if shape == "orders" else None
        if baseline:
            src = self.config.baseline_src
            return Measurement(
                "dpone baseline", path, "sqlite", shape, target, label, spec, reference, src=src
            )
        return Measurement("dpone", path, "sqlite", shape, target, label, spec, reference)

    def _target(self, label: str, target: str, shape: str) -> tuple[dict[str, Any], str]:
        if target == "chdb":
            return {"interface": "chdb", "path": str(self._fresh_chdb(label))}, f"bench.{shape}"
        return {"interface": "http", "port": self.services.clickhouse_port}, self._fresh_http_table(label)

    def raw(self, shape: str, source: str, target: str) -> Measurement:
        rows = self.shape_rows(shape)
        label = f"raw_{source}_{shape}_{rows}_{target}"
        schema = target_schema(shape)

        def spec(rep: int) -> dict[str, Any]:
            endpoint, table = self._target(label, target, shape)
            return {
                "kind": "raw",
                "source": source,
                "source_path": str(self.sources[(shape, str(rows))]) if source == "sqlite" else None,
                "source_dsn": self.pg_dsn,
                "source_table": shape if source == "sqlite" else self.pg_tables[shape],
                "columns": list(schema.names),
                "types": [c.full_type() for c in schema.columns],
                "chunk_rows": self.config.chunk_rows,
                "target": endpoint,
                "target_table": table,
                "ddl": table_ddl(shape, table),
                "checksum": {"target": endpoint, "table": table} if shape == "orders" else None,
            }

        reference = self.references.get(str(rows)) if shape == "orders" else None
        return Measurement("raw pipe", "one SELECT, insert", source, shape, target, label, spec, reference)

    def limit(self, target: str) -> Measurement:
        """The engine's own limit for the orders rows (see transfer_limits.py)."""
        rows = self.config.rows
        label = f"limit_sqlite_orders_{rows}_{target}"
        schema = target_schema("orders")

        def spec(rep: int) -> dict[str, Any]:
            endpoint, table = self._target(label, target, "orders")
            return {
                "kind": f"limit_{target}",
                "source_path": str(self.sources[("orders", str(rows))]),
                "source_table": "orders",
                "columns": list(schema.names),
                "types": [c.full_type() for c in schema.columns],
                "target": endpoint,
                "target_table": table,
                "ddl": table_ddl("orders", table),
                "checksum": {"target": endpoint, "table": table},
            }

        path = "INSERT SELECT FROM sqlite()" if target == "chdb" else "pre-encoded Native, one POST"
        reference = self.references.get(str(rows))
        return Measurement("engine limit", path, "sqlite", "orders", target, label, spec, reference)

    def peer(self, kind: str, shape: str, source: str) -> Measurement:
        rows = self.shape_rows(shape)
        label = f"{kind}_{source}_{shape}_{rows}_http"
        schema = target_schema(shape)
        system = "GenericTransfer" if kind == "generic_transfer" else "hand-written"
        path = "per-row INSERT" if kind == "generic_transfer" else "hook pages, row insert"

        def spec(rep: int) -> dict[str, Any]:
            table = self._fresh_http_table(label)
            return {
                "kind": kind,
                "source": source,
                "source_conn_id": f"bench_sqlite_{shape}_{rows}" if source == "sqlite" else "bench_pg",
                "source_table": shape if source == "sqlite" else self.pg_tables[shape],
                "target_conn_id": "bench_ch",
                "target_table": table,
                "ddl": table_ddl(shape, table),
                "columns": list(schema.names),
                "types": [c.full_type() for c in schema.columns],
                "chunk_rows": self.config.chunk_rows,
                "rows_cap": self.config.gt_rows if kind == "generic_transfer" else None,
            }

        return Measurement(system, path, source, shape, "http", label, spec)

    def mssql(self, kind: str) -> Measurement:
        """The SQL Server source over the emulator (see transfer_mssql.py): bare fetch, read, dpone run."""
        rows = self.config.rows
        label = f"{kind}_large_orders_{rows}_chdb"

        def spec(rep: int) -> dict[str, Any]:
            out: dict[str, Any] = {
                "kind": kind,
                "tds": self.tds,
                "source_table": "large_orders",
                "chunk_rows": self.config.chunk_rows,
            }
            if kind == "dpone_mssql":
                directory = self.work / "manifests" / label
                shutil.rmtree(directory, ignore_errors=True)
                chdb_path = self._fresh_chdb(label)
                manifest = transfer_mssql.write_manifest(
                    directory,
                    connection="bench_mssql",
                    table="large_orders",
                    sink="chdb:////" + str(chdb_path).lstrip("/"),
                    target_table="bench.orders",
                    chunk_rows=self.config.chunk_rows,
                )
                out.update(
                    manifest=str(manifest),
                    run_id=f"bench-{rep}",
                    target_table="bench.orders",
                    checksum_target={"interface": "chdb", "path": str(chdb_path)},
                )
            return out

        system, path = {
            "pymssql_fetch": ("pymssql fetch", "one SELECT, fetchmany"),
            "mssql_read": ("dpone source", "MssqlSource.read()"),
            "dpone_mssql": ("dpone", "lazy_plan + direct"),
        }[kind]
        reference = self.mssql_reference
        if kind == "pymssql_fetch" and reference is not None:
            reference = {"rows": reference["rows"]}  # the bare fetch keeps no rows to sum
        return Measurement(system, path, "mssql", "large_orders", "chdb", label, spec, reference)

    def transfer_plan(self) -> list[Measurement]:
        plan: list[Measurement] = []
        peers_available = _peers_available()
        if not peers_available:
            self.skipped.append(
                "Airflow peers (GenericTransfer, hand-written): apache-airflow-providers-clickhousedb, -sqlite "
                "and -postgres are not installed; pip install -e '.[bench]' -c constraints/test.txt"
            )
            log("SKIPPED: " + self.skipped[-1])
        for shape in self.config.shapes:
            rows = self.shape_rows(shape)
            for target in ("chdb", "http"):
                plan.append(self.dpone(shape, rows, "direct", target))
                plan.append(self.raw(shape, "sqlite", target))
                if shape == "orders":
                    plan.append(self.limit(target))
                plan.append(self.dpone(shape, rows, "staged", target))
                if shape == "orders" and target == "chdb" and not self.config.quick:
                    plan.append(self.dpone(shape, rows, "direct", target, export="file_artifact"))
            if peers_available:
                plan.append(self.peer("hand_written", shape, "sqlite"))
                plan.append(self.peer("generic_transfer", shape, "sqlite"))
            for kind in self.config.postgres_peers:
                if kind == "raw":
                    plan.append(self.raw(shape, "postgres", "http"))
                elif peers_available:
                    plan.append(self.peer(kind, shape, "postgres"))
        if self.tds is not None:
            plan.extend(self.mssql(kind) for kind in ("pymssql_fetch", "dpone_mssql", "mssql_read"))
        if "postgres" in self.config.skip:
            plan = [m for m in plan if m.source != "postgres"]
        if self.config.only:
            plan = [m for m in plan if any(pattern in m.label for pattern in self.config.only)]
        if "timed" in self.config.skip:
            plan = []
        if self.config.baseline_src is not None:  # each baseline run right after its dpone run (paired)
            paired: list[Measurement] = []
            for m in plan:
                paired.append(m)
                if m.system == "dpone" and m.shape == "orders":
                    export, load = m.path.split(" + ")
                    paired.append(self.dpone(m.shape, self.shape_rows(m.shape), load, m.target, export, True))
            plan = paired
        return plan

    def memory_plan(self, plan: list[Measurement]) -> list[Measurement]:
        """Every path (lazy_plan/file_artifact x direct/staged) into both targets at both memory sizes.

        Peak RSS is not noisy, so these run once each (after the timed repetitions); a combination the
        timed plan already measured at that size is taken from it, not run again.
        """
        measured = {m.label: m for m in plan}
        out: list[Measurement] = []
        for rows in self.config.memory_rows:
            for target in ("chdb", "http"):
                for export in MEMORY_EXPORTS:
                    for load in ("direct",) if self.config.quick else ("direct", "staged"):
                        m = self.dpone("orders", rows, load, target, export=export)
                        out.append(measured.get(m.label, m))
        return out

    # -- running -------------------------------------------------------------------------------------

    def run_transfers(self, plan: list[Measurement], reps: int | None = None) -> None:
        reps = self.config.reps if reps is None else reps
        for rep in range(reps):
            for m in plan:
                try:
                    result = measure(m.spec(rep), self._env_for(m.src))
                except ChildFailed as exc:
                    m.errors.append(str(exc))
                    log(f"rep {rep + 1}: {m.label} FAILED: {exc}")
                    continue
                problem = _checksum_problem(m, result)
                if problem is not None:
                    m.errors.append(problem)
                    log(f"rep {rep + 1}: {m.label} FAILED: {problem}")
                    continue
                m.reps.append(result)
                rate = result["rows"] / result["seconds"] if result["seconds"] else 0
                log(
                    f"rep {rep + 1}/{reps} {m.label}: {result['rows']:,} rows in "
                    f"{result['seconds']:.2f}s ({rate:,.0f} rows/s), e2e {result['wall_s']:.2f}s, "
                    f"cpu {result['cpu_s']:.2f}s, rss {result['max_rss_mb']:.0f} MB"
                )

    def run_guard(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self.services.make_postgres_durable()
        if not self.services.durable_postgres:
            self.skipped.append(
                "guard on PostgreSQL: the given cluster was measured as configured (fsync unknown)"
            )
        stores = {
            "sqlite": lambda rep: "sqlite:///" + str(self.work / "guard" / f"state-{rep}.sqlite"),
            "postgres": lambda rep: self.pg_url,
        }
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in stores}
        (self.work / "guard").mkdir(parents=True, exist_ok=True)
        for rep in range(self.config.reps):
            for name, url in stores.items():
                spec = {
                    "kind": "guard",
                    "store_url": url(rep),
                    "partitions": list(self.config.guard_partitions),
                }
                try:
                    runs[name].append(measure(spec, self.env)["guard"])
                except ChildFailed as exc:
                    log(f"guard {name} FAILED: {exc}")
        for name, reps in runs.items():
            if not reps:
                continue
            out[name] = {}
            for count in self.config.guard_partitions:
                key = str(count)
                out[name][key] = {
                    metric: statistics.median(r[key][metric] for r in reps)
                    for metric in (
                        "ms_per_partition",
                        "arm_s",
                        "promote_s",
                        "cpu_s",
                        "scan_empty_s",
                        "scan_after_s",
                    )
                }
            log(
                f"guard {name}: "
                + ", ".join(f"{n} -> {v['ms_per_partition']:.2f} ms/partition" for n, v in out[name].items())
            )
        return out

    def run_route_scan(self) -> dict[str, Any]:
        """Planning with nothing to move over ``scan_history_rows`` checkpoints of the route, per store.

        Each repetition seeds a store of its own: an empty SQLite file, a new PostgreSQL database. A store
        kept from earlier repetitions or invocations (``--keep``) holds their histories too, and the scan
        then measures the size of the store (1.5 GB after many kept invocations: 3.2 s instead of 0.67 s)
        rather than the route's 100,000 rows."""
        out: dict[str, Any] = {}
        scan_dir = self.work / "scan"
        scan_dir.mkdir(parents=True, exist_ok=True)

        def sqlite_store(rep: int) -> str:
            path = scan_dir / f"state-{rep}.sqlite"
            path.unlink(missing_ok=True)
            return "sqlite:///" + str(path)

        stores = {"sqlite": sqlite_store, "postgres": self._fresh_pg_scan_database}
        for name, url in stores.items():
            reps = []
            for rep in range(self.config.reps):
                spec = {
                    "kind": "route_scan",
                    "store_url": url(rep),
                    "history_rows": self.config.scan_history_rows,
                }
                try:
                    reps.append(measure(spec, self.env)["route_scan"])
                except ChildFailed as exc:
                    log(f"route scan {name} FAILED: {exc}")
            if reps:
                out[name] = {
                    "history_rows": reps[0]["history_rows"],
                    "latest_rows": reps[0]["latest_rows"],
                    "seconds": statistics.median(r["seconds"] for r in reps),
                    "cpu_seconds": statistics.median(r["cpu_seconds"] for r in reps),
                    "spread_s": [min(r["seconds"] for r in reps), max(r["seconds"] for r in reps)],
                }
                log(
                    f"route scan {name}: {out[name]['history_rows']:,} history rows "
                    f"({out[name]['latest_rows']:,} latest) planned in {out[name]['seconds']:.3f}s"
                )
        return out

    def run_reader(self, plan: list[Measurement]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        rows = self.config.rows
        first_day = (datasets.LAST_DAY - timedelta(days=datasets.DAYS - 1)).isoformat()
        for target in ("chdb", "http"):
            source = next(
                (
                    m
                    for m in plan
                    if m.system == "dpone"
                    and m.path == "lazy_plan + direct"
                    and m.shape == "orders"
                    and m.target == target
                    and m.reps
                    and m.label.endswith(f"_{rows}_{target}")
                ),
                None,
            )
            if source is None:
                continue
            spec: dict[str, Any] = {
                "kind": "reader",
                "interface": target,
                "first_day": first_day,
                "days": datasets.DAYS,
            }
            if target == "chdb":
                spec.update(path=str(self.work / "chdb" / source.label), table="bench.orders")
            else:
                spec.update(port=self.services.clickhouse_port, table=f"{self.ch_db}.{source.label}")
            reps = []
            for _ in range(self.config.reps):
                try:
                    reps.append(measure(spec, self.env))
                except ChildFailed as exc:
                    log(f"reader {target} FAILED: {exc}")
            if reps:
                best = sorted(reps, key=lambda r: r["seconds"])[len(reps) // 2]
                out[target] = {**best, "seconds": statistics.median(r["seconds"] for r in reps)}
                log(
                    f"reader {target}: {out[target]['rows']:,} rows observed in {out[target]['seconds']:.2f}s"
                )
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.http_client is not None:
                self.http_client.command(f"DROP DATABASE IF EXISTS {self.ch_db}")
                self.http_client.close()
        with contextlib.suppress(Exception):
            self._drop_pg_database()
        self.services.stop()
        if not self.config.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def _checksum_problem(m: Measurement, result: dict[str, Any]) -> str | None:
    """Why the target does not hold exactly the source's rows, or None (a fast wrong transfer fails)."""
    if m.reference is None:
        return None
    found = result.get("checksum")
    if found is None:
        return "no checksum was read from the target"
    wrong = [k for k in m.reference if found.get(k) != m.reference[k]]
    if wrong:
        return "checksum mismatch: " + ", ".join(f"{k} {found.get(k)} != {m.reference[k]}" for k in wrong)
    return None


def _peers_available() -> bool:
    import importlib.util

    for module in (
        "airflow.providers.clickhousedb",
        "airflow.providers.sqlite",
        "airflow.providers.postgres",
    ):
        try:
            if importlib.util.find_spec(module) is None:
                return False
        except ModuleNotFoundError:
            return False
    return True


# -- summary ---------------------------------------------------------------------------------------------


def _find(plan: list[Measurement], **want: str) -> Measurement | None:
    for m in plan:
        if all(getattr(m, k) == v for k, v in want.items()) and m.reps:
            return m
    return None


def _rate(m: Measurement | None, key: str = "rows_per_s") -> float | None:
    return m.median().get(key) if m is not None else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def _paired(m: Measurement | None, base: Measurement | None) -> float | None:
    """Median over repetitions of base seconds / m seconds: each pair ran back to back, so drift of the
    machine between repetitions cancels (the ratio of medians does not cancel it)."""
    if m is None or base is None or not m.reps or len(m.reps) != len(base.reps):
        return None
    ratios = [b["seconds"] / a["seconds"] for a, b in zip(m.reps, base.reps, strict=True) if a["seconds"]]
    return round(statistics.median(ratios), 3) if ratios else None


def memory_table(config: Config, memory: list[Measurement]) -> dict[str, dict[str, float | None]]:
    """Peak RSS (MB) of each path and target at each memory size: {"lazy_plan + direct, chdb": {rows: MB}}."""
    table: dict[str, dict[str, float | None]] = {}
    for m in memory:
        rows = next(str(n) for n in config.memory_rows if m.label.endswith(f"_{n}_{m.target}"))
        table.setdefault(f"{m.path}, {m.target}", {})[rows] = m.median().get("max_rss_mb")
    return table


def summarize(
    config: Config,
    plan: list[Measurement],
    guard: dict[str, Any],
    reader: dict[str, Any],
    memory: list[Measurement] | None = None,
) -> dict[str, Any]:
    memory = memory or []
    rows_label = f"_{config.rows}_"
    main = [
        m
        for m in plan
        if m.shape == "orders" and m.source == "sqlite" and (m.system != "dpone" or rows_label in m.label)
    ]
    dpone_chdb = _find(main, system="dpone", path="lazy_plan + direct", target="chdb")
    dpone_http = _find(main, system="dpone", path="lazy_plan + direct", target="http")
    staged_chdb = _find(main, system="dpone", path="lazy_plan + staged", target="chdb")
    staged_http = _find(main, system="dpone", path="lazy_plan + staged", target="http")
    raw_chdb = _find(main, system="raw pipe", target="chdb")
    raw_http = _find(main, system="raw pipe", target="http")
    limit_chdb = _find(main, system="engine limit", target="chdb")
    limit_http = _find(main, system="engine limit", target="http")
    artifact_chdb = _find(main, system="dpone", path="file_artifact + direct", target="chdb")
    mssql_fetch = _find(plan, system="pymssql fetch")
    mssql_dpone = _find(plan, system="dpone", source="mssql")
    mssql_read = _find(plan, system="dpone source", source="mssql")
    generic = _find(main, system="GenericTransfer")
    hand = _find(main, system="hand-written")
    peak_rss = memory_table(config, memory)
    growth = [
        by_size[large] / by_size[small]
        for by_size in peak_rss.values()
        for small, large in [(str(config.memory_rows[0]), str(config.memory_rows[1]))]
        if by_size.get(small) and by_size.get(large)
    ]
    lazy_direct_chdb = peak_rss.get("lazy_plan + direct, chdb", {})
    rss = [lazy_direct_chdb.get(str(rows)) for rows in config.memory_rows]
    largest = str(max(config.guard_partitions))
    summary = {
        "rows": config.rows,
        "dpone_rows_per_s": _rate(dpone_chdb),
        "raw_rows_per_s": _rate(raw_chdb),
        "dpone_staged_rows_per_s": _rate(staged_chdb),
        "dpone_http_rows_per_s": _rate(dpone_http),
        "dpone_staged_http_rows_per_s": _rate(staged_http),
        "raw_http_rows_per_s": _rate(raw_http),
        "generic_transfer_rows_per_s": _rate(generic),
        "generic_transfer_rows": generic.median().get("rows") if generic else None,
        "hand_written_rows_per_s": _rate(hand),
        "dpone_vs_raw": _ratio(_rate(dpone_chdb), _rate(raw_chdb)),
        "dpone_vs_raw_http": _ratio(_rate(dpone_http), _rate(raw_http)),
        "staged_vs_raw": _ratio(_rate(staged_chdb), _rate(raw_chdb)),
        "staged_vs_raw_http": _ratio(_rate(staged_http), _rate(raw_http)),
        "dpone_vs_generic_transfer": _ratio(_rate(dpone_http), _rate(generic)),
        "dpone_vs_hand_written": _ratio(_rate(dpone_http), _rate(hand)),
        "dpone_vs_raw_cpu": _ratio(_rate(dpone_chdb, "rows_per_cpu_s"), _rate(raw_chdb, "rows_per_cpu_s")),
        "dpone_vs_raw_paired": _paired(dpone_chdb, raw_chdb),
        "dpone_vs_raw_http_paired": _paired(dpone_http, raw_http),
        "staged_vs_raw_paired": _paired(staged_chdb, raw_chdb),
        "staged_vs_raw_http_paired": _paired(staged_http, raw_http),
        "file_artifact_rows_per_s": _rate(artifact_chdb),
        "limit_chdb_rows_per_s": _rate(limit_chdb),
        "limit_http_rows_per_s": _rate(limit_http),
        "direct_vs_limit_chdb": _ratio(_rate(dpone_chdb), _rate(limit_chdb)),
        "staged_vs_limit_chdb": _ratio(_rate(staged_chdb), _rate(limit_chdb)),
        "file_artifact_vs_limit_chdb": _ratio(_rate(artifact_chdb), _rate(limit_chdb)),
        "direct_vs_limit_http": _ratio(_rate(dpone_http), _rate(limit_http)),
        "staged_vs_limit_http": _ratio(_rate(staged_http), _rate(limit_http)),
        "direct_vs_limit_chdb_paired": _paired(dpone_chdb, limit_chdb),
        "direct_vs_limit_http_paired": _paired(dpone_http, limit_http),
        **_baseline_ratios(main, limit_chdb, limit_http),
        "mssql_vs_pymssql_fetch": _ratio(_rate(mssql_dpone), _rate(mssql_fetch)),
        "mssql_read_vs_pymssql_fetch": _ratio(_rate(mssql_read), _rate(mssql_fetch)),
        "mssql_vs_pymssql_fetch_paired": _paired(mssql_dpone, mssql_fetch),
        "pymssql_fetch_rows_per_s": _rate(mssql_fetch),
        "peak_rss_mb_100k": rss[0],
        "peak_rss_mb_1m": rss[1],
        "memory_rows": list(config.memory_rows),
        "rss_5m_over_1m_max": round(max(growth), 3) if growth else None,
        "peak_rss_mb": peak_rss,
        "guard_ms_per_partition_sqlite": guard.get("sqlite", {}).get(largest, {}).get("ms_per_partition"),
        "guard_ms_per_partition_postgres": guard.get("postgres", {}).get(largest, {}).get("ms_per_partition"),
        "guard_partitions": int(largest),
        "reader_seconds": (reader.get("chdb") or {}).get("seconds"),
        "reader_http_seconds": (reader.get("http") or {}).get("seconds"),
        "quick": config.quick,
    }
    return summary


def _baseline_ratios(
    main: list[Measurement], limit_chdb: Measurement | None, limit_http: Measurement | None
) -> dict[str, float | None]:
    """With ``--baseline-src``: the same limit ratios for the baseline tree, and dpone / baseline paired."""
    out: dict[str, float | None] = {}
    for path, key in (
        ("lazy_plan + direct", "direct"),
        ("lazy_plan + staged", "staged"),
        ("file_artifact + direct", "file_artifact"),
    ):
        for target, limit in (("chdb", limit_chdb), ("http", limit_http)):
            base = _find(main, system="dpone baseline", path=path, target=target)
            if base is None:
                continue
            now = _find(main, system="dpone", path=path, target=target)
            out[f"baseline_{key}_vs_limit_{target}"] = _ratio(_rate(base), _rate(limit))
            out[f"{key}_vs_baseline_{target}_paired"] = _paired(now, base)
    return out


def targets(summary: dict[str, Any], guard: dict[str, Any]) -> list[dict[str, Any]]:
    def check(
        name: str, measured: float | None, goal: float, higher: bool, unit: str = "x"
    ) -> dict[str, Any]:
        met = None if measured is None else (measured >= goal if higher else measured < goal)
        shown = "-" if measured is None else f"{measured:.3g}{unit}"
        return {
            "name": name,
            "measured": shown,
            "target": f"{'>=' if higher else '<'} {goal}{unit}",
            "met": met,
        }

    out = [
        check("dpone direct / raw pipe (chDB)", summary["dpone_vs_raw"], 0.85, True),
        check("dpone direct / raw pipe (HTTP)", summary["dpone_vs_raw_http"], 0.85, True),
        check("dpone staged / raw pipe (chDB)", summary["staged_vs_raw"], 0.7, True),
        check("dpone staged / raw pipe (HTTP)", summary["staged_vs_raw_http"], 0.7, True),
        check("dpone direct / raw pipe, paired reps (chDB)", summary["dpone_vs_raw_paired"], 0.85, True),
        check("dpone direct / raw pipe, paired reps (HTTP)", summary["dpone_vs_raw_http_paired"], 0.85, True),
        check("dpone staged / raw pipe, paired reps (chDB)", summary["staged_vs_raw_paired"], 0.7, True),
        check("dpone staged / raw pipe, paired reps (HTTP)", summary["staged_vs_raw_http_paired"], 0.7, True),
        check("dpone direct / engine limit (chDB)", summary["direct_vs_limit_chdb"], 0.5, True),
        check("dpone staged / engine limit (chDB)", summary["staged_vs_limit_chdb"], 0.5, True),
        check(
            "dpone file_artifact / engine limit (chDB)", summary["file_artifact_vs_limit_chdb"], 0.35, True
        ),
        check("dpone direct / server limit (HTTP)", summary["direct_vs_limit_http"], 0.4, True),
        check("dpone staged / server limit (HTTP)", summary["staged_vs_limit_http"], 0.4, True),
        check(
            "dpone mssql (TDS emulator) / bare pymssql fetch", summary["mssql_vs_pymssql_fetch"], 0.8, True
        ),
        check("dpone / GenericTransfer (HTTP)", summary["dpone_vs_generic_transfer"], 10, True),
        check("dpone / hand-written (HTTP)", summary["dpone_vs_hand_written"], 1.0, True),
        check("guard ms/partition, SQLite", summary["guard_ms_per_partition_sqlite"], 2, False, " ms"),
        check("guard ms/partition, PostgreSQL", summary["guard_ms_per_partition_postgres"], 2, False, " ms"),
        check(
            f"route scan + plan, {summary.get('route_scan_history_rows') or 0:,} history rows, nothing to move",
            summary.get("route_scan_100k_s"),
            0.3,
            False,
            " s",
        ),
        check("reader, 1M-row generation incl. start-up", summary["reader_seconds"], 3, False, " s"),
    ]
    out.append(check("peak RSS at 5M / at 1M, largest over paths", summary["rss_5m_over_1m_max"], 1.2, False))
    out[-1]["target"] = "<= 1.2x"
    if out[-1]["met"] is False and summary["rss_5m_over_1m_max"] == 1.2:
        out[-1]["met"] = True
    for store, by_count in guard.items():
        counts = sorted(int(n) for n in by_count)
        if len(counts) >= 2:
            first, last = (
                by_count[str(counts[0])]["ms_per_partition"],
                by_count[str(counts[-1])]["ms_per_partition"],
            )
            out.append(
                check(
                    f"guard linear on {store} (ms/partition at {counts[-1]} / at {counts[0]})",
                    _ratio(last, first),
                    1.5,
                    False,
                )
            )
    return out


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_start": os.getloadavg(),
    }
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(Exception):
        import chdb
        import clickhouse_connect

        info["clickhouse_connect"] = clickhouse_connect.__version__
        info["chdb"] = chdb.__version__
    return info


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    started = time.monotonic()
    bench = Bench(config)
    results: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in config.__dict__.items()},
    }
    try:
        bench.start()
        bench.generate()
        plan = bench.transfer_plan()
        bench.run_transfers(plan)
        memory = bench.memory_plan(plan) if "memory" not in config.skip else []
        bench.run_transfers([m for m in memory if not m.reps], reps=1)
        guard = bench.run_guard() if "guard" not in config.skip else {}
        scan = bench.run_route_scan() if "scan" not in config.skip else {}
        reader = bench.run_reader(plan) if "reader" not in config.skip else {}
    finally:
        bench.close()
    results["machine"]["load_average_end"] = os.getloadavg()
    results["transfers"] = [
        {
            "system": m.system,
            "path": m.path,
            "source": m.source,
            "shape": m.shape,
            "target": m.target,
            "label": m.label,
            "median": m.median(),
            "reps": m.reps,
            "errors": m.errors,
        }
        for m in plan
    ]
    results["guard"] = guard
    results["reader"] = reader
    results["route_scan"] = scan
    results["skipped"] = bench.skipped
    results["postgres_fsync_on"] = bench.services.durable_postgres
    summary = summarize(config, plan, guard, reader, memory)
    summary["route_scan_100k_s"] = (scan.get("sqlite") or {}).get("seconds")
    summary["route_scan_100k_s_postgres"] = (scan.get("postgres") or {}).get("seconds")
    summary["route_scan_history_rows"] = config.scan_history_rows
    results["memory"] = summary["peak_rss_mb"]
    results["memory_transfers"] = [
        {"label": m.label, "path": m.path, "target": m.target, "median": m.median(), "errors": m.errors}
        for m in memory
    ]
    results["summary"] = summary
    results["targets"] = targets(summary, guard)
    results["seconds"] = round(time.monotonic() - started, 1)
    results["title"] = (
        f"dpone benchmark {results['started_at']} — {config.rows:,} orders rows, {config.reps} rep(s), "
        f"{results['machine'].get('cores')} cores"
    )
    stamp = results["started_at"].replace(":", "").replace("+0000", "Z")
    json_path = config.results_dir / f"bench-{stamp}{'-quick' if config.quick else ''}.json"
    png_path = json_path.with_suffix(".png")
    report.write_json(results, json_path)
    chart_problem = report.write_chart(results, png_path)
    print(report.terminal_table(results))
    print(f"\nresults: {json_path}")
    print(f"chart:   {png_path}" if chart_problem is None else f"chart:   not written: {chart_problem}")
    for note in bench.skipped:
        print(f"skipped: {note}")
    failures = [e for m in [*plan, *memory] for e in m.errors]
    if failures:
        print(f"\n{len(failures)} measurement(s) failed; see the JSON file", file=sys.stderr)
    summary_line = {key: summary.get(key) for key in SUMMARY_KEYS}
    summary_line.update({k: v for k, v in summary.items() if k not in summary_line})
    summary_line["failed_measurements"] = len(failures)
    print(json.dumps(summary_line, sort_keys=False))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
