"""Robust parsing and errors (issue 11, point 6): bounded secret scan, deep YAML, --debug, SIGINT."""

from __future__ import annotations

import json
import re
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.cli import run_cmd
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import has_uri_password, load_manifest, load_manifest_dict
from airflow_provider_dpone.manifests.yaml_strict import MAX_DEPTH

#: The pattern the scan replaced (quadratic on long values): the linear scan must agree with it.
OLD_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*:[^/?#@\s]*@")

MANIFEST = textwrap.dedent(
    """\
    kind: native_transfer
    name: {name}
    source:
      type: sqlite
      connection: sqlite:///source.sqlite
      table: orders
      partitioning: {{kind: day, column: order_date}}
    sink:
      type: clickhouse
      connection: chdb:///clickhouse
      table: demo.orders
      strategy: incremental_append
    checkpoints:
      connection: sqlite:///state.sqlite
    """
)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# -- the password scan is linear --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["a" * 1_000_000, "a://" * 250_000, "x://" + ":" * 999_990, "1+" * 500_000 + "://u:p", "a:" * 500_000],
)
def test_a_1_mb_value_is_scanned_for_passwords_in_under_a_second(value: str) -> None:
    # CPU time, not wall time: a backtracking scan takes minutes of CPU, a busy machine only delays a linear one
    started = time.process_time()
    has_uri_password(value)
    assert time.process_time() - started < 1.0


def test_a_manifest_with_a_1_mb_name_is_validated_in_under_a_second() -> None:
    data = {"kind": "native_transfer", "name": "a" * 1_000_000}
    started = time.process_time()
    with pytest.raises(DponeError) as refused:
        load_manifest_dict(data)
    assert time.process_time() - started < 1.0
    assert refused.value.code is ErrorCode.MANIFEST_INVALID


def test_a_password_at_the_end_of_a_1_mb_value_is_still_found() -> None:
    assert has_uri_password("a" * 1_000_000 + " mssql://etl:pw@host/db")
    assert not has_uri_password("a" * 1_000_000 + " mssql://host/db?user=etl")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab1+.-:/@?#% \n", max_size=40))
def test_the_linear_scan_agrees_with_the_old_pattern(value: str) -> None:
    assert has_uri_password(value) is bool(OLD_PATTERN.search(value))


# -- deep YAML is an invalid manifest ---------------------------------------------------------------------


@pytest.mark.parametrize("style", ["block", "flow"])
def test_yaml_nested_5000_deep_is_manifest_invalid_with_exit_2(tmp_path: Path, style: str) -> None:
    path = tmp_path / "deep.yaml"
    if style == "flow":
        path.write_text("kind: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    else:
        path.write_text("- " * 5000 + "x\n", encoding="utf-8")  # block sequences, one inside the other
    for command in (("manifest", "validate", str(path)), ("run", str(path))):
        result = invoke(*command)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: manifest_invalid"), result.stderr
        assert "RecursionError" not in result.output
        assert f"nested deeper than {MAX_DEPTH} levels" in result.stderr


def test_a_manifest_just_within_the_nesting_budget_is_not_refused_for_depth(tmp_path: Path) -> None:
    path = tmp_path / "nested.yaml"
    path.write_text(MANIFEST.format(name="n") + "x: " + "[" * 50 + "]" * 50 + "\n", encoding="utf-8")
    with pytest.raises(DponeError) as refused:
        load_manifest(path)
    assert "nested deeper" not in refused.value.render()  # refused for the unknown key, not the depth


# -- dpone run --debug ------------------------------------------------------------------------------------


@pytest.fixture
def crashing_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("SELECT secret FROM somewhere")

    monkeypatch.setattr(run_cmd, "execute_run", crash)
    monkeypatch.delenv("DPONE_DEBUG", raising=False)


@pytest.mark.parametrize("args", [("run", "--debug", "m.yaml"), ("--debug", "run", "m.yaml")])
def test_dpone_run_debug_prints_the_traceback_of_an_unexpected_error(
    crashing_run: None, args: tuple[str, ...]
) -> None:
    result = invoke(*args)
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "RuntimeError" in result.stderr
    assert "error: unexpected_error: unexpected internal failure (RuntimeError)" in result.stderr
    assert "rerun with --debug" not in result.stderr


def test_dpone_run_without_debug_hides_the_message_and_points_at_debug(crashing_run: None) -> None:
    result = invoke("run", "m.yaml")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr and "SELECT secret" not in result.output
    assert "rerun with --debug" in result.stderr


# -- SIGINT inside the target window ----------------------------------------------------------------------


@pytest.fixture
def demo_manifest(tmp_path: Path) -> Path:
    from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source

    create_demo_source(tmp_path / "source.sqlite", 200, days=3)
    path = tmp_path / "manifest.yaml"
    path.write_text(MANIFEST.format(name="interrupted"), encoding="utf-8")
    return path


def test_ctrl_c_after_the_target_mutated_prints_the_blocked_route_text_and_exits_3(
    demo_manifest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink

    original = ClickHouseSink.load

    def load_then_interrupt(self: ClickHouseSink, *args: Any, **kwargs: Any) -> int:
        original(self, *args, **kwargs)  # the rows landed
        raise KeyboardInterrupt

    monkeypatch.setattr(ClickHouseSink, "load", load_then_interrupt)
    result = invoke("run", str(demo_manifest))

    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()  # progress lines (stderr is not a terminal here), then the error
    first, *hints = lines[next(i for i, line in enumerate(lines) if line.startswith("error: ")) :]
    assert first.startswith("error: native_transfer_manual_reconciliation_required: route ")
    assert "(the run was interrupted)" in first
    assert hints[0].strip() == run_cmd.INTERRUPTED_LINE
    assert sum("phase=target_outcome_unknown" in line for line in hints) == 3  # one per day
    assert any(line.strip().startswith("resolve:  dpone guard resolve") for line in hints)
    assert "Aborted!" not in result.output

    monkeypatch.setattr(ClickHouseSink, "load", original)
    again = invoke("run", str(demo_manifest))  # the route really is blocked
    assert again.exit_code == 3
    assert "this attempt wrote nothing to the target" in again.stderr


def test_ctrl_c_before_the_target_was_invoked_is_still_a_plain_abort(
    demo_manifest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink

    def interrupt(self: ClickHouseSink, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ClickHouseSink, "prepare_target", interrupt)
    result = invoke("run", str(demo_manifest))
    assert result.exit_code == 1
    assert "Aborted!" in result.output
    assert "manual_reconciliation" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{dir}", "--json"],
        ["demo", "--dir", "{file}", "--json"],
        ["guard", "inspect", "--json"],
        ["guard", "resolve", "{file}", "--all-blocked", "--as", "maybe", "--reason", "x", "--json"],
        ["guard", "resolve", "{file}", "--all-blocked", "--as", "committed", "--json"],
        ["replay", "status", "{dir}", "--json"],
    ],
    ids=["directory", "demo-into-a-file", "no-manifest", "bad-choice", "missing-option", "replay"],
)
def test_a_usage_error_of_a_json_invocation_is_one_json_object_on_stdout(
    tmp_path: Path, args: list[str]
) -> None:
    """Red before: click printed these as text on stderr and stdout stayed empty (a script's decode failed)."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST.format(name="orders"), encoding="utf-8")
    given = [a.format(dir=tmp_path, file=manifest) for a in args]
    result = CliRunner().invoke(cli, given)
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)
    assert error["error"] == "usage_error" and error["message"] and error["details"] == {}


def test_a_usage_error_without_json_stays_clicks_text(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["run", str(tmp_path)])
    assert result.exit_code == 2 and "Usage: " in result.output and not result.stdout.lstrip().startswith("{")
