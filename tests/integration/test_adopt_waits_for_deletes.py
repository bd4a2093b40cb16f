"""``guard rebaseline --adopt-target`` waits for the target's pending deletes before it counts.

Real 18.16 server (its mutations run as merges, so ``SYSTEM STOP MERGES`` keeps a delete pending, as a
large table's delete stays pending for minutes). Red before: the runbook's reload after a TTL (delete the
expired days, a new store, adopt) adopted days a delete was still removing at their old counts; once the
delete ended the next run skipped them: 20 of 50 rows missing, exit 0.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.server_rig import server_database

DAYS = [f"2026-01-0{day}" for day in range(1, 6)]


@pytest.fixture
def server(clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    with server_database(clickhouse_http, monkeypatch, "adopt_server", "adopt_") as made:
        yield made


def _manifest(base: Path, database: str, store: str) -> Path:
    path = base / "m.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: adopt
source: {{type: sqlite, connection: sqlite:///source.sqlite, table: t, partitioning: {{kind: day, column: d}}}}
sink: {{type: clickhouse, connection: adopt_server, table: {database}.t, strategy: incremental_append}}
checkpoints: {{connection: "sqlite:///{store}"}}
""",
        encoding="utf-8",
    )
    return path


def _source_rows(base: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        return sorted(db.execute("SELECT id, d, v FROM t").fetchall())


def test_an_adoption_while_a_delete_is_pending_records_nothing_and_after_it_the_run_reloads_exactly(
    tmp_path: Path, server: tuple[Any, str]
) -> None:
    client, database = server
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE t (id INTEGER NOT NULL, d DATE NOT NULL, v TEXT)")
        db.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, DAYS[i % 5], f"v{i}") for i in range(50)])
    manifest = _manifest(tmp_path, database, "state1.sqlite")
    assert CliRunner().invoke(cli, ["run", str(manifest)]).exit_code == 0
    client.command(f"SYSTEM STOP MERGES {database}.t")
    client.command(f"ALTER TABLE {database}.t DELETE WHERE d < '{DAYS[2]}'")
    manifest = _manifest(tmp_path, database, "state2.sqlite")  # a new, empty store

    busy = CliRunner().invoke(
        cli, ["guard", "rebaseline", str(manifest), "--adopt-target", "--reason", "reload after a TTL"]
    )

    assert busy.exit_code == 4, busy.output
    assert "mutation(s) pending" in busy.stderr
    client.command(f"SYSTEM START MERGES {database}.t")
    for _ in range(120):
        if not client.query(
            f"SELECT count() FROM system.mutations WHERE database = '{database}' AND is_done = 0"
        ).result_rows[0][0]:
            break
        time.sleep(0.25)
    adopted = CliRunner().invoke(
        cli, ["guard", "rebaseline", str(manifest), "--adopt-target", "--reason", "reload after a TTL"]
    )
    assert adopted.exit_code == 0, adopted.output
    assert CliRunner().invoke(cli, ["run", str(manifest)]).exit_code == 0
    target = sorted(
        (int(r[0]), str(r[1]), r[2]) for r in client.query(f"SELECT id, d, v FROM {database}.t").result_rows
    )
    assert target == _source_rows(tmp_path)
