"""A mutation someone left pending on the target stops a deleting route before it arms.

Mutations run in order, so a ``replace_partition`` run's delete waits behind a pending one. Seen: a failing
``ALTER TABLE ... DELETE WHERE throwIf(...)`` left on the target; the next run armed, sent its delete, and
failed (at once on chDB, after its 600 s on the 18.16 server) with its partitions' rows deleted and not
loaded again, the route blocked until an operator resolved it. The run now stops before arming
(``native_transfer_route_busy``, exit 4, nothing written) and says how to see and end the mutation.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from click.testing import CliRunner

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.cli.main import cli
from tests.builders import chdb_endpoint
from tests.integration.route_rig import printed, source_rows

TABLE = "demo.orders"


def test_a_pending_mutation_stops_a_replacing_run_before_it_arms(tmp_path: Path) -> None:
    create_demo_source(tmp_path / "source.sqlite", 300, days=5)
    manifest = tmp_path / "orders.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: replacing
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date, lookback: 2}}
sink: {{type: clickhouse, connection: "chdb:///clickhouse", table: {TABLE}, strategy: replace_partition}}
checkpoints: {{connection: "sqlite:///state.sqlite"}}
""",
        encoding="utf-8",
    )
    runner = CliRunner()
    assert runner.invoke(cli, ["run", str(manifest)], catch_exceptions=False).exit_code == 0
    client = open_client(chdb_endpoint(tmp_path / "clickhouse"))
    try:
        # the engine may already say the mutation fails; it stays pending all the same
        with contextlib.suppress(Exception):
            client.command(f"ALTER TABLE {TABLE} DELETE WHERE throwIf(id = 3) = 1")
        assert int(client.query("SELECT count() FROM system.mutations WHERE NOT is_done").result_rows[0][0])
    finally:
        client.close()

    stopped = runner.invoke(cli, ["run", "--json", str(manifest)], catch_exceptions=False)

    assert stopped.exit_code == 4, stopped.output  # red before: armed, deleted two days, failed, blocked
    assert json.loads(stopped.stdout)["error"] == "native_transfer_route_busy"
    inspected = runner.invoke(cli, ["guard", "inspect", str(manifest)], catch_exceptions=False)
    assert "no blocked partitions" in inspected.output
    client = open_client(chdb_endpoint(tmp_path / "clickhouse"))
    try:
        rows = client.query(
            f"SELECT id, toString(order_date), customer, toString(amount), toString(updated_at) FROM {TABLE}"
        ).result_rows
        assert printed(rows) == source_rows(tmp_path)  # every row still there, every value
        client.command("KILL MUTATION WHERE NOT is_done SYNC")
    finally:
        client.close()
    assert runner.invoke(cli, ["run", str(manifest)], catch_exceptions=False).exit_code == 0
