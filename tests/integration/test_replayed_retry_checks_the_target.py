"""A retry reported from its quality capsule still checks that the target holds the committed rows.

With ``durable_quality_replay``, a retry of a completed run ID (Airflow clearing the task) is reported from
the run's capsule and reads nothing of the source (ADR 0074). Red before: after a DBA's TRUNCATE between the
run and its retry, that retry ended with exit 0 and ``quality: passed`` over an empty table, while the same
retry without replay stops with ``target_lost_committed_rows`` (exit 3). Black-box: ``dpone run`` on the demo
SQLite source into chDB, a SQLite checkpoint (and capsule) store; the source file is moved away before
every retry, so a retry that read it would fail.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.integration.route_rig import TARGET, chdb_command, dpone, source_rows, target_rows

MANIFEST = """\
kind: native_transfer
name: replayed
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date{lookback}}}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: {target}
  strategy: {strategy}
  load: {load}
  order_by: [order_date, id]
  options: {{durable_quality_replay: true}}
checkpoints:
  connection: sqlite:///state.sqlite
quality:
  checks:
    - {{type: row_count}}
    - {{type: unique, columns: [id]}}
"""

ROUTES = [
    pytest.param("incremental_append", "", id="append"),
    pytest.param("full_refresh", "", id="full_refresh"),
    pytest.param("replace_partition", ", lookback: 2", id="replace_partition-lookback"),
]


def _manifest(base: Path, strategy: str, lookback: str, load: str) -> Path:
    path = base / "replayed.yaml"
    text = MANIFEST.format(target=TARGET, strategy=strategy, lookback=lookback, load=load)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("load", ["direct", "staged"])
@pytest.mark.parametrize(("strategy", "lookback"), ROUTES)
def test_a_replayed_retry_over_a_truncated_target_stops_like_a_retry_without_replay(
    base: Path, strategy: str, lookback: str, load: str
) -> None:
    manifest = _manifest(base, strategy, lookback, load)
    assert dpone("run", str(manifest), "--run-id", "R1").exit_code == 0
    expected = source_rows(base)
    assert target_rows(base) == expected
    (base / "source.sqlite").rename(base / "source.away")  # a retry that read the source would fail

    intact = dpone("run", "--json", str(manifest), "--run-id", "R1")  # the table intact: replayed, exit 0
    assert intact.exit_code == 0, intact.output
    report = json.loads(intact.output)
    assert report["quality"]["replayed"] is True and report["rows_committed"] == 0
    assert target_rows(base) == expected

    chdb_command(base, f"TRUNCATE TABLE {TARGET}")  # the DBA, between the run and its retry
    retry = dpone("run", "--json", str(manifest), "--run-id", "R1")

    assert retry.exit_code == 3, retry.output
    error = json.loads(retry.output)
    assert error["error"] == "native_transfer_target_lost_committed_rows"
    assert error["details"]["committed_rows"] == len(expected) and error["details"]["target_rows"] == 0
    assert error["details"]["replayed_run_id"] == "R1" and "deleting_ttl" not in error["details"]
    assert target_rows(base) == []  # nothing written

    text = dpone("run", str(manifest), "--run-id", "R1")  # the text an on-call reads
    assert text.exit_code == 3
    assert "this retry of run 'R1' would have been reported from its kept quality evidence" in text.output
    assert "quality: passed" not in text.output


def test_a_replayed_full_refresh_retry_counts_only_what_its_run_loaded(base: Path) -> None:
    """A full refresh replaces the whole table: a day an earlier refresh loaded and the source has lost since
    is in no run's plan, and its old commit says nothing of the table. Counted, it stopped the replay of the
    refresh that left it out (the table "lost" that day)."""
    manifest = _manifest(base, "full_refresh", "", "direct")
    assert dpone("run", str(manifest), "--run-id", "R0").exit_code == 0
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date = (SELECT max(order_date) FROM orders)")
    assert dpone("run", str(manifest), "--run-id", "R1").exit_code == 0
    expected = source_rows(base)
    assert target_rows(base) == expected

    retry = dpone("run", "--json", str(manifest), "--run-id", "R1")

    assert retry.exit_code == 0, retry.output
    assert json.loads(retry.output)["quality"]["replayed"] is True
    assert target_rows(base) == expected
