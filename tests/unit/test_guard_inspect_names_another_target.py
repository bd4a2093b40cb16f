"""``dpone guard inspect`` says which blocked partitions were written to another target than the one it counts.

Red before: pointed at another target (a chDB folder spelled in another case by the task log's recipe, or
another environment's connection of the same name), it printed ``target_rows 0`` with no word of it, while
``guard resolve`` refused the same partitions as "written to another target". Inspecting refuses nothing
(it only reads); it says so, per partition in ``--json`` and as a warning before the table. The black-box
run over two real chDB folders: /tmp/helper-172/upper_host/repro.sh.
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.compose import Runtime, open_runtime
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import sha256_tag
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.guard.inspection import another_target_lines, inspect_blocked
from airflow_provider_dpone.runtime.source_binding import TARGET_KEY, TARGET_PLACE_KEY
from tests.builders import day, stored_checkpoint
from tests.doubles import CountingSink

AT = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
ELSEWHERE = sha256_tag("another chDB folder")


def write_manifest(tmp_path: Path) -> Path:
    path = tmp_path / "orders.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            kind: native_transfer
            name: elsewhere
            source:
              type: sqlite
              connection: sqlite:///source.sqlite
              table: orders
              partitioning: {kind: day, column: order_date}
            sink:
              type: clickhouse
              connection: chdb:///ChData
              table: demo.orders
              strategy: incremental_append
              order_by: [order_date, id]
            checkpoints:
              connection: sqlite:///state.sqlite
            """
        ),
        encoding="utf-8",
    )
    return path


def armed(checkpoint: PartitionCheckpoint, target: str, place: str) -> PartitionCheckpoint:
    """``checkpoint`` as an attempt through ``target`` (leading to ``place``) armed it and died."""
    guard = TargetCommitGuard.for_phase(GuardPhase.ARMED, sha256_tag("crashed")).to_json()
    return checkpoint.model_copy(
        update={
            "run_id": "crashed",
            "status": CheckpointStatus.EXPORTED,
            "diagnostics": {GUARD_KEY: guard, TARGET_KEY: target, TARGET_PLACE_KEY: place},
        }
    )


def test_inspect_marks_the_partitions_an_attempt_wrote_to_another_target(tmp_path: Path) -> None:
    route = load_manifest(write_manifest(tmp_path)).route
    here, there = day("2026-11-29", "2026-11-30"), day("2026-11-30", "2026-12-01")
    latest = [
        armed(stored_checkpoint(route, here, AT), "chdb://x", "sha256:" + "1" * 64),
        armed(stored_checkpoint(route, there, AT), "chdb://x", ELSEWHERE),
    ]

    rows = inspect_blocked(
        latest,
        None,
        CountingSink({here: 10}),  # type: ignore[arg-type]
        "demo.orders",
        route,
        written_elsewhere=lambda c: c.diagnostics[TARGET_PLACE_KEY] == ELSEWHERE,
    )

    assert [(r.label, r.target_rows, r.target_elsewhere) for r in rows] == [
        ("2026-11-29", 10, False),
        ("2026-11-30", 0, True),
    ]
    [first, *hints] = another_target_lines(rows)
    assert first.startswith("1 blocked partition(s) (2026-11-30) were written to another target")
    assert any("AIRFLOW_CONN_" in line for line in hints)
    assert another_target_lines(rows[:1]) == []


@pytest.fixture
def blocked_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two blocked days: one armed through the target the manifest leads to now, one through another."""
    manifest = write_manifest(tmp_path)
    loaded = load_manifest(manifest)
    with open_runtime(loaded) as runtime:  # resolves the connections, opens nothing
        binding = runtime.connection_binding()
    assert binding.target is not None and binding.target_place is not None
    store = SqlCheckpointStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    try:
        store.ensure_schema()
        store.write_batch(
            [
                armed(
                    stored_checkpoint(loaded.route, day("2026-11-29", "2026-11-30"), AT),
                    binding.target,
                    binding.target_place,
                ),
                armed(
                    stored_checkpoint(loaded.route, day("2026-11-30", "2026-12-01"), AT),
                    binding.target,
                    ELSEWHERE,
                ),
            ]
        )
    finally:
        store.close()
    # the target counted: none of the attempts' rows (the chDB folder itself is never opened here)
    monkeypatch.setattr(Runtime, "sink_factory", lambda self, endpoint=None: lambda: CountingSink({}))
    return manifest


def test_guard_inspect_warns_that_a_partition_was_written_to_another_target(blocked_route: Path) -> None:
    result = CliRunner().invoke(cli, ["guard", "inspect", str(blocked_route), "--no-source"])

    assert result.exit_code == 0, result.output
    assert (
        "warning: 1 blocked partition(s) (2026-11-30) were written to another target than the one the sink "
        "connection leads to now" in result.stderr
    )
    assert "2026-11-29" not in result.stderr.split("AIRFLOW_CONN_")[0]
    assert "target_rows" in result.stdout  # the counts are still shown: inspecting refuses nothing


def test_guard_inspect_json_marks_each_partition(blocked_route: Path) -> None:
    result = CliRunner().invoke(cli, ["guard", "inspect", str(blocked_route), "--no-source", "--json"])

    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["blocked"]
    assert sorted((r["label"], r["target_elsewhere"]) for r in rows) == [
        ("2026-11-29", False),
        ("2026-11-30", True),
    ]
