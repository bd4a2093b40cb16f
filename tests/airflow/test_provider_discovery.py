"""Airflow discovers the provider, its hooks and connection types through its own CLI."""

from __future__ import annotations

import tempfile
from pathlib import Path

from airflow_provider_dpone import get_provider_info
from tests.airflow.conftest import airflow_env, last_json_line, run_airflow

HOOKS = {
    "dpone_mssql": "airflow_provider_dpone.hooks.mssql.DponeMsSqlHook",
    "dpone_clickhouse": "airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook",
    "dpone_checkpoints": "airflow_provider_dpone.hooks.checkpoints.DponeCheckpointStoreHook",
}


def _fresh_env() -> dict[str, str]:
    return airflow_env(Path(tempfile.mkdtemp(prefix="dpone-airflow-cli-")))


def test_provider_info_names_the_distribution_and_imports_no_airflow() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-dpone"
    assert {entry["connection-type"]: entry["hook-class-name"] for entry in info["connection-types"]} == HOOKS


def test_airflow_providers_list_shows_the_provider() -> None:
    result = run_airflow(["providers", "list", "-o", "json"], _fresh_env())
    assert result.returncode == 0, result.stderr[-3000:]
    packages = {row["package_name"] for row in last_json_line(result.stdout)}
    assert "airflow-provider-dpone" in packages


def test_airflow_providers_hooks_shows_every_dpone_hook() -> None:
    result = run_airflow(["providers", "hooks", "-o", "json"], _fresh_env())
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {row["connection_type"]: row for row in last_json_line(result.stdout)}
    for conn_type, hook_class in HOOKS.items():
        assert rows[conn_type]["class"] == hook_class
        assert rows[conn_type]["package_name"] == "airflow-provider-dpone"
        assert rows[conn_type]["conn_id_attribute_name"].endswith("_conn_id")  # read from the imported class


def test_hooks_relabel_the_connection_form_for_airflow_2_and_3() -> None:
    from airflow_provider_dpone.hooks.checkpoints import DponeCheckpointStoreHook
    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook
    from airflow_provider_dpone.hooks.mssql import DponeMsSqlHook

    declared = {
        entry["connection-type"]: entry["ui-field-behaviour"]
        for entry in get_provider_info()["connection-types"]
    }
    for hook in (DponeMsSqlHook, DponeClickHouseHook, DponeCheckpointStoreHook):
        behaviour = hook.get_ui_field_behaviour()
        assert behaviour["relabeling"]["schema"] == "Database"
        assert behaviour["placeholders"] == declared[hook.conn_type]["placeholders"]
    assert "chdb" in DponeClickHouseHook.get_ui_field_behaviour()["placeholders"]["extra"]


def test_every_module_the_provider_info_lists_imports_and_defines_its_kind() -> None:
    import importlib

    info = get_provider_info()
    kinds = {"hooks": "Hook", "operators": "Operator", "sensors": "Sensor"}
    for key, suffix in kinds.items():
        modules = [m for entry in info[key] for m in entry["python-modules"]]
        assert modules, key
        for name in modules:
            module = importlib.import_module(name)
            assert any(attr.endswith(suffix) for attr in vars(module)), (key, name)
