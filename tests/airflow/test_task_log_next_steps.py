"""The on-call lines a failed task logs work when pasted into a shell, whatever the manifest's folder."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from airflow import DAG

from airflow_provider_dpone.cli.demo_cmd import DEMO_MANIFEST
from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator
from airflow_provider_dpone.operators.task_log import DICT_MANIFEST_HINT, TARGET_STAGES, StageRecorder


def test_the_lines_after_a_target_touching_failure_quote_a_manifest_path_with_blanks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before: ``inspect:  dpone checkpoints /dags with blanks/orders.yaml`` was several arguments."""
    dags = tmp_path / "airflow dags"
    dags.mkdir()
    (dags / "orders.yaml").write_text(DEMO_MANIFEST, encoding="utf-8")
    operator = NativeTransferOperator(task_id="transfer", manifest="orders.yaml")
    loaded, ref = operator._load(dags)
    operator._loaded, operator._manifest_ref, operator._touched = loaded, ref, None
    operator._stages = StageRecorder()
    operator._stages.stage(sorted(TARGET_STAGES)[0])  # the engine began a target stage

    captured = logging.getLogger("tests.task_log")  # the task's own logger does not propagate here
    monkeypatch.setattr(NativeTransferOperator, "log", property(lambda self: captured))
    with caplog.at_level(logging.INFO, logger="tests.task_log"):
        operator._log_next_steps(None)

    commands = [line.split(":", 1)[1] for line in caplog.text.splitlines() if "  inspect:  dpone" in line]
    assert commands and all(str(dags / "orders.yaml") in shlex.split(c) for c in commands)


@pytest.mark.parametrize("touched", [True, False], ids=["after-the-target", "before-the-target"])
def test_a_dict_manifest_tells_the_operator_to_save_its_rendered_form(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, touched: bool
) -> None:
    """Red before: the commands named ``'<manifest of task ...>'`` and the hint never printed (the quoted
    pseudo-path starts with a quote; a manifest of inline URIs only printed no block at all)."""
    manifest = yaml.safe_load(DEMO_MANIFEST.replace("sqlite:///", f"sqlite:///{tmp_path}/"))
    with DAG("orders_dict", schedule=None, start_date=datetime(2026, 1, 1)):
        operator = NativeTransferOperator(task_id="transfer", manifest=manifest)
    loaded, ref = operator._load(tmp_path)
    operator._loaded, operator._manifest_ref, operator._touched = loaded, ref, None
    operator._stages = StageRecorder()
    if touched:
        operator._stages.stage(sorted(TARGET_STAGES)[0])

    captured = logging.getLogger("tests.task_log")
    monkeypatch.setattr(NativeTransferOperator, "log", property(lambda self: captured))
    with caplog.at_level(logging.INFO, logger="tests.task_log"):
        operator._log_next_steps(None)

    assert ref.startswith("<manifest of task orders_dict.transfer")
    assert caplog.text.count(DICT_MANIFEST_HINT) == (2 if touched else 1)


@pytest.mark.parametrize("final", [True, False], ids=["after-its-commit", "before-publication"])
def test_a_quality_check_that_failed_after_its_commit_fails_the_task_without_a_retry(
    monkeypatch: pytest.MonkeyPatch, final: bool
) -> None:
    """Red before: the retry found every partition committed, measured nothing and turned the task green."""
    from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
    from airflow_provider_dpone.operators.native_transfer import (  # the Airflow version's own class
        AirflowFailException,
        DponeTaskFailed,
    )

    def failing(self: NativeTransferOperator, context: object, run_id: str) -> None:
        raise DponeError(ErrorCode.QUALITY_CHECK_FAILED, "1 required quality check(s) failed", final=final)

    monkeypatch.setattr(NativeTransferOperator, "_run", failing)
    operator = NativeTransferOperator(task_id="transfer", manifest="orders.yaml")

    with pytest.raises(AirflowFailException if final else DponeTaskFailed):
        operator.execute({"run_id": "manual__1"})


def _printed_by_airflow(connection: object) -> str:
    """What ``airflow connections get ID -o json`` prints for ``connection`` (its own mapper and console,
    which turn every field and extra value into text)."""
    import contextlib
    import io

    from airflow.cli.commands.connection_command import _connection_mapper
    from airflow.cli.simple_table import AirflowConsole

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        AirflowConsole().print_as(data=[connection], output="json", mapper=_connection_mapper)
    return next(line for line in printed.getvalue().splitlines() if line.startswith("[{"))


@pytest.mark.parametrize(
    ("conn_type", "fields", "role"),
    [
        ("chdb", {"host": "ChData"}, "sink"),
        ("sqlite", {"host": "State.sqlite"}, "checkpoints"),
        (
            "dpone_clickhouse",
            {
                "host": "CH.Example",
                "port": 8443,
                "schema": "analytics",
                "login": "etl",
                "password": "p:w@d/?#'\" $x",
                "extra": '{"secure": true, "verify": false, "session_settings": {"max_threads": 2}}',
            },
            "sink",
        ),
        (
            "postgres",
            {"host": "PG.Example", "schema": "dpone", "login": "u@x", "password": "a%2Fb"},
            "checkpoints",
        ),
    ],
    ids=["chdb-folder", "sqlite-file", "clickhouse-server", "postgres-store"],
)
def test_the_logged_export_line_gives_dpone_the_connection_airflow_holds(
    tmp_path: Path, conn_type: str, fields: dict[str, object], role: str
) -> None:
    """Red before: the line exported the connection's ``get_uri``, whose host is lower-cased when read: a
    chDB folder ``ChData`` in the host field became ``chdata`` (another folder: ``guard inspect`` counted
    ``target_rows 0`` there), a SQLite file ``State.sqlite`` another file. The logged line runs in bash
    here; only ``airflow`` is a stand-in printing what ``airflow connections get -o json`` prints."""
    from airflow.models.connection import Connection

    from airflow_provider_dpone.connections import resolve_endpoint
    from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection
    from airflow_provider_dpone.operators.task_log import outside_airflow_lines

    connection = Connection(conn_id="the_conn", conn_type=conn_type, **fields)  # type: ignore[arg-type]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "printed.json").write_text(_printed_by_airflow(connection), encoding="utf-8")
    fake = bin_dir / "airflow"
    fake.write_text(f"#!/bin/sh\ncat {shlex.quote(str(tmp_path / 'printed.json'))}\n", encoding="utf-8")
    fake.chmod(0o755)
    [export] = [
        line.strip() for line in outside_airflow_lines(["the_conn"]) if line.strip().startswith("export ")
    ]
    script = f'{export}\nprintf %s "$AIRFLOW_CONN_THE_CONN"\n'
    env = {"PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])}

    ran = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)

    assert ran.returncode == 0, ran.stderr
    manifest_dir = tmp_path / "dags"
    read = resolve_endpoint(
        "the_conn", role=role, manifest_dir=manifest_dir, env={"AIRFLOW_CONN_THE_CONN": ran.stdout}
    )
    held = endpoint_from_connection(connection, name="the_conn", manifest_dir=manifest_dir)
    assert read.model_dump() == held.model_dump()
    assert read.password == held.password
