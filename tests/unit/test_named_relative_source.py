"""A named source connection whose SQLite path is relative names a file per manifest folder (ADR 0079).

Seen before the fix: ``AIRFLOW_CONN_SHARD_SRC='sqlite:///orders.sqlite'`` used by manifests in dags/eu and
dags/us reads two files, but checkpoints recorded the name alone, so the second folder's route skipped every
day as committed (append, exit 0, rows lost) or replaced the first one's days. What a manifest's runs
record of their source is checked here, resolved and nothing opened; the runs themselves in
``tests/integration/test_source_connection.py``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_provider_dpone.compose import EndpointResolver, open_runtime
from airflow_provider_dpone.connections import resolve_endpoint
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.connection_binding import ConnectionBinding
from airflow_provider_dpone.runtime.source_binding import source_reference


def _manifest(folder: Path, connection: str = "shard_src") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "orders.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: orders_{folder.name}
source: {{type: sqlite, connection: "{connection}", table: orders, partitioning: {{kind: day, column: order_date}}}}
sink: {{type: clickhouse, connection: "chdb:///chdb", table: demo.orders, strategy: incremental_append,
        order_by: [order_date, id]}}
checkpoints: {{connection: "sqlite:///state.sqlite"}}
""",
        encoding="utf-8",
    )
    return path


def _binding(manifest: Path, resolve: EndpointResolver | None = None) -> ConnectionBinding:
    with open_runtime(load_manifest(manifest), resolve=resolve) as runtime:
        return runtime.connection_binding()


def test_a_relative_named_connection_records_a_file_per_folder_and_accepts_its_bare_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_SRC", "sqlite:///orders.sqlite")

    eu, us = _binding(_manifest(tmp_path / "eu")), _binding(_manifest(tmp_path / "us"))

    assert source_reference(eu.source or "") != source_reference(us.source or "")
    assert source_reference(eu.source or "").startswith("sha256:")  # no path stored in clear
    assert eu.source_as_written == us.source_as_written == "shard_src"  # what earlier releases recorded
    inline = _binding(_manifest(tmp_path / "eu", "sqlite:///orders.sqlite"))
    assert source_reference(inline.source or "") == source_reference(eu.source or "")  # one file


def test_a_named_connection_with_an_absolute_path_keeps_recording_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_SRC", f"sqlite:///{tmp_path / 'orders.sqlite'}")

    binding = _binding(_manifest(tmp_path / "eu"))

    assert (binding.source, binding.source_as_written) == ("shard_src", None)


def test_the_operator_and_the_cli_record_one_file_for_one_folder_reached_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator finds a manifest from the DAG file's real folder and reads the Airflow connection; the
    CLI takes the path it is given (here a linked folder) and reads ``AIRFLOW_CONN_*``."""
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_SRC", "sqlite:///orders.sqlite")
    real = _manifest(tmp_path / "dags" / "eu")
    (tmp_path / "eu-link").symlink_to(real.parent, target_is_directory=True)
    connection = SimpleNamespace(
        conn_id="shard_src",
        conn_type="sqlite",
        host="orders.sqlite",
        port=None,
        schema=None,
        login=None,
        password=None,
        extra_dejson={},
    )

    def airflow(name_or_uri: str, role: str) -> EndpointDescriptor:
        if name_or_uri == "shard_src":
            return endpoint_from_connection(connection, name=name_or_uri, manifest_dir=real.parent)
        return resolve_endpoint(name_or_uri, role=role, manifest_dir=real.parent, env={})

    cli = _binding(tmp_path / "eu-link" / "orders.yaml")
    operator = _binding(real, resolve=airflow)

    assert cli.source is not None and cli.source_as_written == "shard_src"
    assert source_reference(operator.source or "") == source_reference(cli.source)


@pytest.mark.parametrize(
    ("value", "relative"),
    [("sqlite:///orders.sqlite", True), ("sqlite:////srv/orders.sqlite", False), ("sqlite:///~/o.db", False)],
)
def test_a_descriptor_says_whether_its_path_hangs_off_the_manifest_folder(
    tmp_path: Path, value: str, relative: bool
) -> None:
    endpoint = resolve_endpoint(
        "shard_src", role="source", manifest_dir=tmp_path, env={"AIRFLOW_CONN_SHARD_SRC": value}
    )

    assert endpoint.path_relative is relative
