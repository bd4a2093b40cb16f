"""A named source connection whose SQLite path is relative names a file per manifest folder, and one under
``~`` a file per user (ADR 0079).

Seen before the fix: ``AIRFLOW_CONN_SHARD_SRC='sqlite:///orders.sqlite'`` used by manifests in dags/eu and
dags/us reads two files, but checkpoints recorded the name alone, so the second folder's route skipped every
day as committed (append, exit 0, rows lost) or replaced the first one's days; ``sqlite:///~/orders.sqlite``
run by two users did the same. Then the bare name, what earlier releases recorded, was still taken for
whatever file the path resolved to: a new folder's first run skipped every committed day, exit 0. What a
manifest's runs record of their source, and which history they take as theirs, is checked here, resolved and
nothing opened; the runs themselves in ``tests/integration/test_source_connection.py``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_provider_dpone.compose import EndpointResolver, open_runtime
from airflow_provider_dpone.connections import resolve_endpoint
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.connection_binding import ConnectionBinding, require_bound_connections
from airflow_provider_dpone.runtime.route_family import RouteFamily
from airflow_provider_dpone.runtime.source_binding import SOURCE_KEY, source_reference
from tests.builders import day, stored_checkpoint


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


def test_a_relative_named_connection_records_a_file_per_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_SRC", "sqlite:///orders.sqlite")

    eu, us = _binding(_manifest(tmp_path / "eu")), _binding(_manifest(tmp_path / "us"))

    assert source_reference(eu.source or "") != source_reference(us.source or "")
    assert source_reference(eu.source or "").startswith("sha256:")  # no path stored in clear
    assert eu.source_as_written == us.source_as_written == "shard_src"  # what earlier releases recorded
    inline = _binding(_manifest(tmp_path / "eu", "sqlite:///orders.sqlite"))
    assert source_reference(inline.source or "") == source_reference(eu.source or "")  # one file


def test_a_named_connection_under_the_home_records_a_file_per_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before: ``~`` was taken as absolute, so the route recorded the bare name and the second user's
    run skipped every day the first one committed (exit 0)."""
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_SRC", "sqlite:///~/orders.sqlite")
    manifest = _manifest(tmp_path / "dags")

    monkeypatch.setenv("HOME", str(tmp_path / "worker"))
    worker = _binding(manifest)
    monkeypatch.setenv("HOME", str(tmp_path / "oncall"))
    oncall = _binding(manifest)

    assert source_reference(worker.source or "") != source_reference(oncall.source or "")
    assert worker.source_as_written == oncall.source_as_written == "shard_src"


ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)
AT = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)


def _takes_history_of(binding: ConnectionBinding, recorded: str) -> bool:
    """Whether a run with ``binding`` goes on over a commit that recorded ``recorded`` (the check a run
    and the route sensor make before anything is read)."""
    commit = stored_checkpoint(ROUTE, day("2026-11-01", "2026-11-02"), AT)
    commit = commit.model_copy(update={"diagnostics": {SOURCE_KEY: recorded}})
    family = RouteFamily(route=ROUTE, own=(commit,), target_wide=(commit,))
    try:
        require_bound_connections(family, binding, "m.yaml", naming=None)  # type: ignore[arg-type]
    except DponeError as error:
        assert error.details["changed"] == ["source"]
        return False
    return True


@pytest.mark.parametrize(
    ("value", "connection"),
    [
        ("sqlite:///orders.sqlite", "shard_src"),  # a relative named connection: its bare name
        ("sqlite:///~/orders.sqlite", "shard_src"),  # one under the home: its bare name
        ("", "sqlite:///orders.sqlite"),  # a relative inline URI: the digest of its text
        ("", "sqlite:///~/orders.sqlite"),  # an inline URI under the home: the same
    ],
)
def test_an_earlier_form_that_names_no_file_is_taken_in_no_folder_or_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, connection: str
) -> None:
    """Red before: what earlier releases recorded was taken as the same source in every folder (or home),
    so a new folder's first run skipped every day the first one committed, exit 0. Now each place stops
    (once: ``--source-moved`` proves the file); this release's record of one file is taken by it alone."""
    monkeypatch.setenv("AIRFLOW_CONN_SHARD_SRC", value)
    per_user = "~" in value + connection

    def place(name: str) -> ConnectionBinding:
        monkeypatch.setenv("HOME", str(tmp_path / name))
        return _binding(_manifest(tmp_path / ("dags" if per_user else name), connection))

    eu, us = place("eu"), place("us")
    earlier = source_reference(connection)

    assert not _takes_history_of(eu, earlier) and not _takes_history_of(us, earlier)
    assert _takes_history_of(eu, source_reference(eu.source or ""))
    assert not _takes_history_of(us, source_reference(eu.source or ""))


def test_an_absolute_inline_uri_as_written_is_still_taken_as_its_file(tmp_path: Path) -> None:
    """It names one file wherever it is used: an upgrade stops no route reading it."""
    written = f"sqlite:///{tmp_path}/eu/../eu/orders.sqlite"

    binding = _binding(_manifest(tmp_path / "eu", written))

    assert binding.source != written and _takes_history_of(binding, source_reference(written))


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
    ("value", "per_place"),
    [("sqlite:///orders.sqlite", True), ("sqlite:////srv/orders.sqlite", False), ("sqlite:///~/o.db", True)],
)
def test_a_descriptor_says_whether_its_path_names_a_file_per_folder_or_user(
    tmp_path: Path, value: str, per_place: bool
) -> None:
    endpoint = resolve_endpoint(
        "shard_src", role="source", manifest_dir=tmp_path, env={"AIRFLOW_CONN_SHARD_SRC": value}
    )
    inline = resolve_endpoint(value, role="source", manifest_dir=tmp_path, env={})

    assert endpoint.path_per_place is inline.path_per_place is per_place
