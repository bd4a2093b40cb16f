"""The Airflow 3 connection form shows real fields (conn-fields), and every field is an extra dpone reads."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from airflow_provider_dpone import CONN_FIELDS, get_provider_info
from airflow_provider_dpone.connections.extras import (
    CHDB_EXTRAS,
    CLICKHOUSE_HTTP_EXTRAS,
    MSSQL_EXTRAS,
    POSTGRES_EXTRAS,
    SQLITE_EXTRAS,
)
from tests.airflow.conftest import airflow_env, last_json_line, run_airflow

#: What each dpone connection type's extras may hold (``backend`` is the checkpoint type's own switch).
READ_BY_TYPE = {
    "dpone_mssql": MSSQL_EXTRAS,
    "dpone_clickhouse": CLICKHOUSE_HTTP_EXTRAS | CHDB_EXTRAS,
    "dpone_checkpoints": SQLITE_EXTRAS | POSTGRES_EXTRAS | {"backend"},
}


def test_every_form_field_is_an_extra_the_parser_admits() -> None:
    declared = {
        entry["connection-type"]: entry["conn-fields"] for entry in get_provider_info()["connection-types"]
    }
    assert declared == CONN_FIELDS
    for conn_type, fields in declared.items():
        assert set(fields) <= READ_BY_TYPE[conn_type], conn_type
    assert {"tds_version", "login_timeout", "query_timeout"} <= set(declared["dpone_mssql"])
    assert {"interface", "path", "secure", "verify", "connect_timeout", "send_receive_timeout"} <= set(
        declared["dpone_clickhouse"]
    )
    assert {"backend", "path", "secure"} <= set(declared["dpone_checkpoints"])


def test_the_provider_info_matches_the_installed_airflow_schema() -> None:
    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_airflow_loads_the_form_fields_of_every_dpone_connection_type() -> None:
    env = airflow_env(Path(tempfile.mkdtemp(prefix="dpone-airflow-widgets-")))
    listed = run_airflow(["providers", "list", "-o", "json"], env)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "airflow-provider-dpone" in {row["package_name"] for row in last_json_line(listed.stdout)}
    result = run_airflow(["providers", "widgets", "-o", "json"], env)
    assert result.returncode == 0, result.stderr[-3000:]
    shown = {
        row["connection_parameter_name"]
        for row in last_json_line(result.stdout)
        if row["package_name"] == "airflow-provider-dpone"
    }
    expected = {f"extra__{conn_type}__{name}" for conn_type, fields in CONN_FIELDS.items() for name in fields}
    # an Airflow whose provider manager predates `conn-fields` (3.1) shows the extras as the JSON box only
    assert shown == (expected if _airflow_reads_conn_fields() else set())


def _airflow_reads_conn_fields() -> bool:
    """Whether the installed Airflow's provider manager knows the ``conn-fields`` key (3.2 and later)."""
    import airflow

    return "conn-fields" in (Path(airflow.__file__).parent / "providers_manager.py").read_text()
