"""Issue 14, point 8: the REQUIRED/UNVERIFIED count is visible outside ``--json``, and the observation
budget has an operator knob bounded by ADR 0074's 60 s."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.cli.run_cmd import print_report
from airflow_provider_dpone.contracts.errors import ErrorCode
from airflow_provider_dpone.runtime.replay.budget import BUDGET_VARIABLE, observation_budget
from tests.doubles import orders_rows
from tests.quality_replay_rig import Rig, expect_code, quality_manifest

MANIFEST = quality_manifest(checks=({"type": "row_count"},))


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path, orders_rows())
    yield made
    made.close()


def test_text_report_counts_committed_partitions_without_original_proof(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.engine(quality_manifest(durable=False, checks=())).run("legacy")  # 3 partitions, no capsule
    rig.source.rows.append((100, dt.date(2026, 12, 1), 7))
    report = rig.engine(MANIFEST).run("run-1")
    assert report.quality is not None and report.quality.unverified_partitions == 3
    print_report(report)
    text = capsys.readouterr().out
    assert "3 committed partition(s) REQUIRED/UNVERIFIED" in text
    assert "dpone replay status" in text


def test_text_report_is_silent_when_every_partition_has_its_proof(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    print_report(rig.engine(MANIFEST).run("run-1"))
    assert "REQUIRED/UNVERIFIED" not in capsys.readouterr().out


@pytest.mark.parametrize(("raw", "expected"), [("", 60.0), ("2.5", 2.5), ("60", 60.0), (" 0.001 ", 0.001)])
def test_budget_knob_accepts_values_up_to_sixty_seconds(raw: str, expected: float) -> None:
    assert observation_budget({BUDGET_VARIABLE: raw}) == expected


@pytest.mark.parametrize("raw", ["60.001", "61", "0", "-1", "nan", "inf", "ten", "1e400"])
def test_budget_knob_refuses_anything_outside_the_adr_bound(raw: str) -> None:
    expect_code(ErrorCode.USAGE, lambda: observation_budget({BUDGET_VARIABLE: raw}))


def test_the_knob_reaches_the_reader(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine hands the reader the knob's budget (read when the replay ports are composed)."""
    seen: list[float] = []
    observe = rig.reader.observe

    def recording(endpoint, request, budget_s=60.0):  # type: ignore[no-untyped-def]
        seen.append(budget_s)
        return observe(endpoint, request, budget_s)

    rig.reader.observe = recording  # type: ignore[method-assign]
    monkeypatch.setenv(BUDGET_VARIABLE, "7.5")
    rig.engine(MANIFEST).run("run-1")
    assert seen == [7.5]
    monkeypatch.setenv(BUDGET_VARIABLE, "90")
    expect_code(ErrorCode.USAGE, lambda: rig.engine(MANIFEST))
