"""A SQL Server route (pymssql over the TDS emulator) keeps its identity rules end to end.

Black-box ``dpone`` into chDB: pinning ``source.columns`` stops the append route before any target I/O,
``dpone guard rebaseline`` records what the old definition committed, and a new checkpoint store in front of
the loaded target stops instead of appending again. The target is compared with the served rows value by value.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind

TARGET = "demo.tds_orders"


def dpone(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def root(tmp_path: Path, tds_emulator: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> Path:
    password = tds_emulator.password.get_secret_value() if tds_emulator.password else ""
    monkeypatch.setenv(
        "AIRFLOW_CONN_TDS_SOURCE",
        f"mssql://{tds_emulator.user}:{password}@{tds_emulator.host}:{tds_emulator.port}/{tds_emulator.database}",
    )
    return tmp_path


def manifest(root: Path, *, columns: str = "", state: str = "state.sqlite") -> Path:
    path = root / "tds.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: tds_identity
source:
  type: mssql
  connection: tds_source
  table: dbo.orders
{columns}  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: {TARGET}
  strategy: incremental_append
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///{state}
""",
        encoding="utf-8",
    )
    return path


def target_rows(root: Path) -> list[tuple[Any, ...]]:
    client = open_client(
        EndpointDescriptor(
            name="t",
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.CHDB,
            path=str(root / "clickhouse"),
        )
    )
    try:
        rows = client.query(
            f"SELECT id, toString(toDate(order_date)), customer, toString(amount) FROM {TARGET}"
        ).result_rows
    finally:
        client.close()
    return sorted((r[0], r[1], r[2], Decimal(r[3])) for r in rows)


def served(tds_orders: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["order_date"].isoformat(), r["customer"], r["amount"]) for r in tds_orders)


PINNED = "  columns: [id, order_date, customer, amount, updated_at]\n"


def test_pinning_columns_on_a_sql_server_route_stops_then_rebaselines_without_duplicates(
    root: Path, tds_orders: list[dict[str, Any]]
) -> None:
    first = dpone("run", str(manifest(root)))
    assert first.exit_code == 0, first.output
    assert target_rows(root) == served(tds_orders)
    pinned = manifest(root, columns=PINNED)

    blocked = dpone("run", "--json", str(pinned))

    assert blocked.exit_code == 3, blocked.output
    assert json.loads(blocked.output)["error"] == "native_transfer_route_identity_changed"
    rebased = dpone("guard", "rebaseline", str(pinned), "--reason", "pinned columns", "--json")
    assert rebased.exit_code == 0, rebased.output
    assert len(json.loads(rebased.output)["recorded"]) == len({r["order_date"] for r in tds_orders})
    again = dpone("run", "--json", str(pinned))
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["rows_committed"] == 0
    assert target_rows(root) == served(tds_orders)


def test_a_new_checkpoint_store_in_front_of_a_loaded_sql_server_target_stops(
    root: Path, tds_orders: list[dict[str, Any]]
) -> None:
    assert dpone("run", str(manifest(root))).exit_code == 0

    result = dpone("run", "--json", str(manifest(root, state="other-state.sqlite")))

    assert result.exit_code == 3, result.output
    assert json.loads(result.output)["error"] == "native_transfer_target_not_empty"
    adopted = dpone(
        "guard",
        "rebaseline",
        str(manifest(root, state="other-state.sqlite")),
        "--adopt-target",
        "--reason",
        "x",
    )
    assert adopted.exit_code == 0, adopted.output
    assert dpone("run", str(manifest(root, state="other-state.sqlite"))).exit_code == 0
    assert target_rows(root) == served(tds_orders)
