"""OpenLineage facets of NativeTransferOperator, emitted by the real provider's listener in ``dag.test()`` runs.

One driver process runs two DAGs with the OpenLineage file transport on: SQLite -> embedded chDB, and SQL
Server (the TDS emulator, over pymssql) -> the ClickHouse 18.16 server over HTTP. The tests read the events
the provider wrote and check the datasets (namespace, name), the schema facets and the rows written. A
second process blocks every ``openlineage`` import (as if the provider were not installed): the operator
imports, the DAG runs, and the facet methods return ``None``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.airflow.conftest import REPO_ROOT, airflow_env, last_json_line

DRIVER = Path(__file__).with_name("dag_test_driver.py")
ROWS, DAYS = 120, 3
NAMESPACE = "dpone_lineage_test"

DAGS = """\
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

SQLITE_ROUTE = {
    "kind": "native_transfer",
    "name": "lineage_sqlite",
    "source": {
        "type": "sqlite",
        "connection": "ol_sqlite",
        "table": "orders",
        "partitioning": {"kind": "day", "column": "order_date"},
    },
    "sink": {
        "type": "clickhouse",
        "connection": "ol_chdb",
        "table": "demo.orders",
        "strategy": "incremental_append",
        "order_by": ["order_date", "id"],
    },
    "checkpoints": {"connection": "sqlite:///sqlite_state.sqlite"},
}

MSSQL_ROUTE = {
    "kind": "native_transfer",
    "name": "lineage_mssql",
    "source": {
        "type": "mssql",
        "connection": "ol_mssql",
        "table": "[dbo].[ORDERS]",
        "partitioning": {"kind": "day", "column": "order_date"},
    },
    "sink": {
        "type": "clickhouse",
        "connection": "ol_server",
        "table": "SERVER_TABLE",
        "strategy": "incremental_append",
        "order_by": ["order_date", "id"],
    },
    "checkpoints": {"connection": "sqlite:///mssql_state.sqlite"},
}

with DAG("dpone_ol_sqlite", schedule=None, start_date=datetime(2026, 1, 1)) as sqlite_dag:
    NativeTransferOperator(task_id="transfer", manifest=SQLITE_ROUTE)

with DAG("dpone_ol_mssql", schedule=None, start_date=datetime(2026, 1, 1)) as mssql_dag:
    NativeTransferOperator(task_id="transfer", manifest=MSSQL_ROUTE)

# fails before the target: the partition column does not exist
FAILING_ROUTE = {
    **SQLITE_ROUTE,
    "name": "lineage_failing",
    "source": {**SQLITE_ROUTE["source"], "partitioning": {"kind": "day", "column": "no_such_column"}},
    "sink": {**SQLITE_ROUTE["sink"], "table": "demo.failing"},
    "checkpoints": {"connection": "sqlite:///failing_state.sqlite"},
}

with DAG("dpone_ol_failing", schedule=None, start_date=datetime(2026, 1, 1)) as failing_dag:
    NativeTransferOperator(task_id="transfer", manifest=FAILING_ROUTE, retries=0)
"""

#: Runs the shared driver as if the provider were not installed (its modules unimportable, its
#: distributions and so its entry points invisible), then calls the facet methods.
BLOCKED_RUNNER = """\
import importlib.abc
import json
import re
import sys

BLOCKED = ("openlineage", "airflow.providers.openlineage")
HIDDEN = {"apache-airflow-providers-openlineage", "openlineage-python", "openlineage-integration-common",
          "openlineage-sql"}


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class HideDistributions:
    \"\"\"A distribution finder without the OpenLineage distributions (imports pass through).\"\"\"

    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, *args, **kwargs):
        find = getattr(self.inner, "find_spec", None)
        return find(*args, **kwargs) if find is not None else None

    def invalidate_caches(self):
        invalidate = getattr(self.inner, "invalidate_caches", None)
        if invalidate is not None:
            invalidate()

    def find_distributions(self, *args, **kwargs):
        for dist in self.inner.find_distributions(*args, **kwargs):
            name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower()
            if name not in HIDDEN:
                yield dist


try:
    import importlib_metadata  # noqa: F401  (Airflow reads entry points through it: let it install its finder)
except ImportError:
    pass
sys.meta_path[:] = [HideDistributions(f) if hasattr(f, "find_distributions") else f for f in sys.meta_path]
sys.meta_path.insert(0, NotInstalled())
sys.path.insert(0, sys.argv[1])
from tests.airflow import dag_test_driver  # noqa: E402

dag_test_driver.main(sys.argv[2])

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind  # noqa: E402
from airflow_provider_dpone.operators import lineage  # noqa: E402
from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator  # noqa: E402

dag = dag_test_driver.load_dag(sys.argv[3], "dpone_ol_sqlite")
task = dag.get_task("transfer")
chdb = EndpointDescriptor(name="c", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path="/x")
named = lineage.RouteLineage(
    source=lineage.DatasetRef(namespace="sqlite:///x", name="main.orders"),
    target=lineage.target_dataset("demo.orders", chdb),
    rows_written=1,
)
print(json.dumps({"absent": {
    "on_start": repr(task.get_openlineage_facets_on_start()),
    "on_complete": repr(task.get_openlineage_facets_on_complete(None)),
    "of_a_route": repr(lineage.operator_lineage(named)),
    "enabled": lineage.lineage_enabled(),
    "openlineage_modules": sorted(m for m in sys.modules if m.startswith(BLOCKED)),
    "operator_class": NativeTransferOperator.__name__,
}}))
"""


class Lineage:
    def __init__(self, events: list[dict[str, Any]], server_table: str, root: Path) -> None:
        self.events = events
        self.server_table = server_table
        self.root = root

    def event(self, kind: str, dag_id: str) -> dict[str, Any]:
        """The one ``kind`` event (START, COMPLETE, FAIL) of the DAG's transfer task (job ``dag.task``)."""
        name = f"{dag_id}.transfer"
        found = [e for e in self.events if e.get("eventType") == kind and e["job"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} event of {name}, got {len(found)}"
        return found[0]

    def complete(self, dag_id: str) -> dict[str, Any]:
        return self.event("COMPLETE", dag_id)

    def start(self, dag_id: str) -> dict[str, Any]:
        return self.event("START", dag_id)


def _fields(dataset: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]


def _server_columns(server: EndpointDescriptor, table: str) -> list[tuple[str, str]]:
    from airflow_provider_dpone.adapters.clickhouse.client import open_client

    client = open_client(server)
    try:
        return [(str(r[0]), str(r[1])) for r in client.query(f"DESCRIBE TABLE {table}").result_rows]
    finally:
        client.close()


def _drop(server: EndpointDescriptor, table: str) -> None:
    from airflow_provider_dpone.adapters.clickhouse.client import open_client

    client = open_client(server)
    try:
        client.command(f"DROP TABLE IF EXISTS {table}")
    finally:
        client.close()


@pytest.fixture(scope="module")
def emitted(
    migrated_airflow_home: Path,
    tmp_path_factory: pytest.TempPathFactory,
    tds_emulator: EndpointDescriptor,
    clickhouse_http: EndpointDescriptor,
) -> Iterator[Lineage]:
    root = tmp_path_factory.mktemp("openlineage")
    home = root / "airflow_home"
    home.mkdir()
    shutil.copy(migrated_airflow_home / "airflow.db", home / "airflow.db")
    server_table = f"{clickhouse_http.database}.ol_orders_{uuid.uuid4().hex[:10]}"
    dags = root / "dags"
    dags.mkdir()
    (dags / "lineage_dags.py").write_text(DAGS.replace("SERVER_TABLE", server_table))
    create_demo_source(root / "source.sqlite", ROWS, days=DAYS)
    events_file = root / "events.jsonl"
    steps = [
        {"name": name, "action": "run", "dag_id": dag_id, "dag_file": str(dags / "lineage_dags.py")}
        for name, dag_id in (
            ("sqlite", "dpone_ol_sqlite"),
            ("mssql", "dpone_ol_mssql"),
            ("failing", "dpone_ol_failing"),
        )
    ]
    (root / "steps.json").write_text(json.dumps(steps))
    env = airflow_env(
        home,
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__OPENLINEAGE__NAMESPACE=NAMESPACE,
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
        AIRFLOW_CONN_OL_SQLITE=f"sqlite:///{root / 'source.sqlite'}",
        AIRFLOW_CONN_OL_CHDB=json.dumps(
            {"conn_type": "clickhouse", "extra": {"interface": "chdb", "path": str(root / "clickhouse")}}
        ),
        AIRFLOW_CONN_OL_MSSQL=(
            f"mssql://{tds_emulator.user}:{tds_emulator.secret()}@{tds_emulator.host}:{tds_emulator.port}"
            f"/{tds_emulator.database}"
        ),
        AIRFLOW_CONN_OL_SERVER=json.dumps(
            {
                "conn_type": "clickhouse",
                "host": clickhouse_http.host,
                "port": clickhouse_http.port,
                "login": clickhouse_http.user,
                "password": clickhouse_http.secret() or "",
                "schema": clickhouse_http.database,
            }
        ),
    )
    try:
        result = subprocess.run(
            [sys.executable, str(DRIVER), str(root / "steps.json")],
            env=env,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, f"driver failed:\n{result.stdout[-6000:]}"
        runs = last_json_line(result.stdout)["results"]
        for name in ("sqlite", "mssql"):
            assert runs[name]["tasks"]["transfer"]["state"] == "success", result.stdout[-6000:]
        assert runs["failing"]["tasks"]["transfer"]["state"] == "failed"
        assert events_file.exists(), f"the provider wrote no event:\n{result.stdout[-6000:]}"
        events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
        yield Lineage(events, server_table, root)
    finally:
        _drop(clickhouse_http, server_table)


def test_sqlite_to_chdb_run_emits_the_source_and_target_tables_with_their_columns(emitted: Lineage) -> None:
    event = emitted.complete("dpone_ol_sqlite")
    assert event["job"]["namespace"] == NAMESPACE
    [source] = event["inputs"]
    [target] = event["outputs"]
    assert (source["namespace"], source["name"]) == (
        f"sqlite://{emitted.root / 'source.sqlite'}",
        "main.orders",
    )
    assert (target["namespace"], target["name"]) == (f"chdb://{emitted.root / 'clickhouse'}", "demo.orders")
    # the demo table's columns as SQLite declares them, and as the target was created
    assert _fields(source) == [
        ("id", "INTEGER"),
        ("order_date", "DATE"),
        ("customer", "TEXT"),
        ("amount", "NUMERIC(12,2)"),
        ("updated_at", "DATETIME"),
    ]
    assert _fields(target) == [
        ("id", "Int64"),
        ("order_date", "Date"),
        ("customer", "String"),
        ("amount", "Decimal(12, 2)"),
        ("updated_at", "DateTime"),
    ]
    assert target["outputFacets"]["outputStatistics"]["rowCount"] == ROWS


def test_sql_server_to_server_run_names_tables_as_the_openlineage_provider_does(
    emitted: Lineage,
    tds_emulator: EndpointDescriptor,
    clickhouse_http: EndpointDescriptor,
    tds_orders: list[dict[str, Any]],
) -> None:
    event = emitted.complete("dpone_ol_mssql")
    [source] = event["inputs"]
    [target] = event["outputs"]
    # mssql://host:port and database.schema.table (the manifest's "[dbo].[ORDERS]" in canonical form)
    assert source["namespace"] == f"mssql://{tds_emulator.host}:{tds_emulator.port}"
    assert source["name"] == f"{tds_emulator.database}.dbo.orders"
    assert target["namespace"] == f"clickhouse://{clickhouse_http.host}:{clickhouse_http.port}"
    assert target["name"] == emitted.server_table
    # the output schema is the table the server holds; the input one the same columns with SQL Server types
    assert _fields(target) == _server_columns(clickhouse_http, emitted.server_table)
    assert [n for n, _ in _fields(source)] == [n for n, _ in _fields(target)]
    assert dict(_fields(source))["customer"] == "nvarchar"
    assert target["outputFacets"]["outputStatistics"]["rowCount"] == len(tds_orders)


def test_start_events_name_both_tables_before_the_run(emitted: Lineage) -> None:
    for dag_id in ("dpone_ol_sqlite", "dpone_ol_mssql"):
        start, complete = emitted.start(dag_id), emitted.complete(dag_id)
        names = [(d["namespace"], d["name"]) for d in start["inputs"] + start["outputs"]]
        assert names == [(d["namespace"], d["name"]) for d in complete["inputs"] + complete["outputs"]]
        assert "outputStatistics" not in (start["outputs"][0].get("outputFacets") or {})


def test_a_failed_try_still_names_both_tables_but_claims_no_rows(emitted: Lineage) -> None:
    event = emitted.event("FAIL", "dpone_ol_failing")
    [source] = event["inputs"]
    [target] = event["outputs"]
    assert (source["namespace"], source["name"]) == (
        f"sqlite://{emitted.root / 'source.sqlite'}",
        "main.orders",
    )
    assert (target["namespace"], target["name"]) == (f"chdb://{emitted.root / 'clickhouse'}", "demo.failing")
    assert "schema" not in source["facets"] and not target.get("outputFacets")


def test_events_hold_no_credential_and_no_sql(
    emitted: Lineage, tds_emulator: EndpointDescriptor, clickhouse_http: EndpointDescriptor
) -> None:
    text = json.dumps(emitted.events)
    for secret in (tds_emulator.secret(), clickhouse_http.secret()):
        if secret:
            assert secret not in text
    for dataset in (d for e in emitted.events for d in e.get("inputs", []) + e.get("outputs", [])):
        assert "@" not in dataset["namespace"], "a namespace never carries a login"
        assert set(dataset.get("facets", {})) <= {"schema"}
    assert "SELECT" not in text.upper().replace("SELECTIVE", "")


def test_without_the_provider_the_operator_imports_runs_and_returns_no_facets(
    migrated_airflow_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "airflow_home"
    home.mkdir()
    shutil.copy(migrated_airflow_home / "airflow.db", home / "airflow.db")
    dags = tmp_path / "dags"
    dags.mkdir()
    dag_file = dags / "lineage_dags.py"
    dag_file.write_text(DAGS.replace("SERVER_TABLE", "default.unused"))
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=DAYS)
    steps = [{"name": "sqlite", "action": "run", "dag_id": "dpone_ol_sqlite", "dag_file": str(dag_file)}]
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    runner = tmp_path / "blocked_runner.py"
    runner.write_text(BLOCKED_RUNNER)
    env = airflow_env(
        home,
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        # configured as if it were installed: the operator must still not reach for it
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
            {"type": "file", "log_file_path": str(tmp_path / "events.jsonl"), "append": True}
        ),
        AIRFLOW_CONN_OL_SQLITE=f"sqlite:///{tmp_path / 'source.sqlite'}",
        AIRFLOW_CONN_OL_CHDB=json.dumps(
            {"conn_type": "clickhouse", "extra": {"interface": "chdb", "path": str(tmp_path / "clickhouse")}}
        ),
    )
    result = subprocess.run(
        [sys.executable, str(runner), str(REPO_ROOT), str(tmp_path / "steps.json"), str(dag_file)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"runner failed:\n{result.stdout[-6000:]}"
    lines = [json.loads(x) for x in result.stdout.splitlines() if x.startswith(("{", "["))]
    run = next(x["results"]["sqlite"] for x in lines if "results" in x)
    assert run["tasks"]["transfer"]["state"] == "success"
    assert run["tasks"]["transfer"]["xcom"]["rows_committed"] == ROWS
    absent = next(x["absent"] for x in lines if "absent" in x)
    assert absent == {
        "on_start": "None",
        "on_complete": "None",
        "of_a_route": "None",
        "enabled": False,
        "openlineage_modules": [],
        "operator_class": "NativeTransferOperator",
    }
    assert not (tmp_path / "events.jsonl").exists()
