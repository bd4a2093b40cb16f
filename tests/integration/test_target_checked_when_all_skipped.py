"""When every partition is committed, the target is checked, not assumed.

A dropped or truncated target (or a manifest pointed at a fresh chDB directory) used to print "nothing to
do" and exit 0 with no table. Black-box: ``dpone run`` on a SQLite source into chDB, each checkpoint store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from tests.integration.test_route_spelling import (  # noqa: F401  (fixtures)
    TARGET,
    base,
    dpone,
    source_rows,
    store_url,
    target_rows,
    write_manifest,
)

STRATEGIES = ["incremental_append", "replace_partition"]


def _command(root: Path, statement: str) -> None:
    client = open_client(
        EndpointDescriptor(
            name="t",
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.CHDB,
            path=str(root / "clickhouse"),
        )
    )
    try:
        client.command(statement)
    finally:
        client.close()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    "loss",
    [
        pytest.param(lambda b: _command(b, f"DROP TABLE {TARGET}"), id="dropped"),
        pytest.param(lambda b: _command(b, f"TRUNCATE TABLE {TARGET}"), id="truncated"),
        pytest.param(lambda b: shutil.rmtree(b / "clickhouse"), id="new-chdb-directory"),
    ],
)
def test_a_target_that_lost_committed_rows_stops_the_run_with_exit_3(
    base: Path,  # noqa: F811
    store_url: str,  # noqa: F811
    strategy: str,
    loss: object,
) -> None:
    manifest = write_manifest(base, "orders", store_url, strategy=strategy)
    assert dpone("run", str(manifest)).exit_code == 0
    loss(base)  # type: ignore[operator]

    result = dpone("run", "--json", str(manifest))

    assert result.exit_code == 3, result.output
    error = json.loads(result.output)
    assert error["error"] == "native_transfer_target_lost_committed_rows"
    assert error["details"]["committed_rows"] == len(source_rows(base))
    assert error["details"]["target_rows"] == 0
    assert "nothing to do" not in result.output


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_intact_target_still_skips_every_committed_partition(
    base: Path,  # noqa: F811
    store_url: str,  # noqa: F811
    strategy: str,
) -> None:
    manifest = write_manifest(base, "orders", store_url, strategy=strategy)
    assert dpone("run", str(manifest)).exit_code == 0

    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert target_rows(base) == source_rows(base)
