"""The on-call lines a failed task logs work when pasted into a shell, whatever the manifest's folder."""

from __future__ import annotations

import logging
import shlex
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
