"""`dpone runbook [guard|replay]` prints the runbooks shipped as package data, the same text as docs/runbook/,
and the on-call hints name that command instead of a repository path."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.cli.runbook_cmd import RUNBOOKS, runbook_text

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("topic", sorted(RUNBOOKS))
def test_the_packaged_runbook_is_the_documented_one(topic: str) -> None:
    documented = (REPO / "docs" / "runbook" / RUNBOOKS[topic]).read_text(encoding="utf-8")
    assert runbook_text(topic) == documented, f"copy docs/runbook/{RUNBOOKS[topic]} into the package"


@pytest.mark.parametrize(("args", "topic"), [([], "guard"), (["guard"], "guard"), (["replay"], "replay")])
def test_dpone_runbook_prints_it(args: list[str], topic: str) -> None:
    result = CliRunner().invoke(cli, ["runbook", *args])
    assert result.exit_code == 0, result.output
    assert result.output == runbook_text(topic)


def test_an_unknown_topic_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["runbook", "nope"])
    assert result.exit_code == 2


def test_package_data_declares_the_runbooks() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"runbooks/*.md"' in pyproject


def test_no_hint_in_the_package_names_a_repository_runbook_path() -> None:
    package = REPO / "airflow_provider_dpone"
    offenders = [
        str(path.relative_to(REPO))
        for path in package.rglob("*.py")
        if "docs/runbook/" in path.read_text(encoding="utf-8") and path.name != "runbook_cmd.py"
    ]
    assert offenders == []
