"""The ``dpone`` skeleton: manifest validate, checkpoints, error output and exit codes, registration."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from airflow_provider_dpone.cli import main as cli_main
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.cli.output import render_table, reporting_errors
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, sha256_tag
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

MANIFEST = textwrap.dedent(
    """\
    kind: native_transfer
    name: demo_orders
    source:
      type: sqlite
      connection: sqlite:///source.sqlite
      table: orders
      partitioning: {kind: day, column: order_date}
    sink:
      type: clickhouse
      connection: chdb:///clickhouse
      table: demo.orders
      strategy: incremental_append
    checkpoints:
      connection: sqlite:///state.sqlite
    """
)
ROUTE = RouteIdentity(source_table="orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def write(tmp_path: Path, text: str = MANIFEST) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# --- manifest validate -----------------------------------------------------------------------------


def test_validate_valid_manifest_exits_0_and_prints_the_identity(tmp_path: Path) -> None:
    result = invoke("manifest", "validate", str(write(tmp_path)))

    assert result.exit_code == 0, result.output
    assert "is valid" in result.stdout
    assert "identity:  sha256:" in result.stdout
    assert '"durable_quality_replay": false' in result.stdout  # normalized, defaults filled in


def test_validate_json_prints_one_object_with_identity_and_normalized_manifest(tmp_path: Path) -> None:
    result = invoke("manifest", "validate", str(write(tmp_path)), "--json")

    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["valid"] is True
    assert payload["identity"].startswith("sha256:")
    assert payload["normalized"]["source"]["chunk_rows"] == 50_000
    assert payload["connections"]["checkpoints"] == {"form": "inline", "value": "sqlite:///state.sqlite"}


def test_validate_unknown_key_exits_2_naming_the_key_and_the_suggestion(tmp_path: Path) -> None:
    text = MANIFEST.replace(
        "  strategy: incremental_append\n", "  strategy: incremental_append\n  optoins: {}\n"
    )
    result = invoke("manifest", "validate", str(write(tmp_path, text)))

    assert result.exit_code == 2
    assert result.stdout == ""
    first, *hints = result.stderr.splitlines()
    assert first.startswith("error: manifest_invalid: manifest ")
    assert "`sink.optoins` (line 13): unknown key; did you mean `sink.options`?" in hints[0]


def test_validate_reports_multiple_problems_together(tmp_path: Path) -> None:
    text = (
        MANIFEST.replace("  table: orders\n", "  tabel: orders\n")
        .replace("strategy: incremental_append", "strategy: append_only")
        .replace(
            "  strategy: append_only\n", "  strategy: append_only\n  options: {durable_quality_replay: yes}\n"
        )
    )
    result = invoke("manifest", "validate", str(write(tmp_path, text)))

    assert result.exit_code == 2
    assert "(4 problems)" in result.stderr
    for expected in (
        "`source.tabel`",
        "did you mean `source.table`?",
        "`source.table`",
        "missing required key",
        "`sink.strategy`",
        "`sink.options.durable_quality_replay`",
        "expected boolean, found string",
    ):
        assert expected in result.stderr


def test_validate_json_failure_is_one_object_on_stdout(tmp_path: Path) -> None:
    text = MANIFEST.replace(
        "  strategy: incremental_append\n", "  strategy: incremental_append\n  optoins: {}\n"
    )
    result = invoke("manifest", "validate", str(write(tmp_path, text)), "--json")

    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["error"] == "manifest_invalid"
    assert payload["details"]["problems"][0]["suggestion"] == "sink.options"


def test_validate_yaml_syntax_error_shows_the_line(tmp_path: Path) -> None:
    text = MANIFEST.replace("  table: demo.orders\n", "  table: [demo.orders\n")
    result = invoke("manifest", "validate", str(write(tmp_path, text)))

    assert result.exit_code == 2
    assert "YAML syntax error" in result.stderr
    assert "(line 12, column 11)" in result.stderr
    assert "while parsing a flow sequence (started at line 11)" in result.stderr


def test_validate_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("manifest", "validate", str(tmp_path / "missing.yaml"))

    assert result.exit_code == 2
    assert result.stderr.startswith("error: manifest_invalid: cannot read manifest")


# --- checkpoints -----------------------------------------------------------------------------------


def checkpoint(
    day: str, status: CheckpointStatus, guard: dict[str, Any] | None, rows: int | None
) -> PartitionCheckpoint:
    bounds = PartitionBounds(
        kind=BoundsKind.RANGE,
        column="order_date",
        lower=day,
        upper=day + "T24",
        value_type="date",
        label=f"order_date={day}",
    )
    started = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
    return PartitionCheckpoint(
        partition_id=sha256_tag("partition " + day),
        route=ROUTE,
        run_id="manual__1",
        status=status,
        started_at=started,
        completed_at=started if status is CheckpointStatus.COMMITTED else None,
        rows=rows,
        query_hash="q",
        schema_hash="s",
        bounds=bounds,
        diagnostics={GUARD_KEY: guard} if guard is not None else {},
    )


@pytest.fixture
def populated(tmp_path: Path) -> Path:
    from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore

    batch = sha256_tag("batch")
    armed = TargetCommitGuard.for_phase(GuardPhase.ARMED, batch).to_json()
    committed = TargetCommitGuard.for_phase(GuardPhase.CHECKPOINT_COMMITTED, batch).to_json()
    broken = {**armed, "schema_version": "dpone.native_transfer.target_commit_guard.v9"}
    store = SqlCheckpointStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    store.ensure_schema()
    store.write_batch(
        [
            checkpoint("2026-11-10", CheckpointStatus.EXPORTED, armed, 10),
            checkpoint("2026-11-09", CheckpointStatus.COMMITTED, committed, 1234),
            checkpoint("2026-11-10", CheckpointStatus.EXPORTED, armed, 12),  # latest wins
            checkpoint("2026-11-11", CheckpointStatus.EXPORTED, broken, None),
            checkpoint("2026-11-08", CheckpointStatus.COMMITTED, None, 7),  # legacy: no guard
        ]
    )
    store.close()
    return write(tmp_path)


def test_checkpoints_table_lists_latest_per_partition_with_guard_phases(populated: Path) -> None:
    result = invoke("checkpoints", str(populated))

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "route main.orders -> demo.orders (incremental_append): 4 partitions, 2 blocked"
    header = lines[1].split()
    assert header == [
        "partition_id",
        "status",
        "guard_phase",
        "checkpoint_batch_id",
        "bounds",
        "rows",
        "started_at",
        "completed_at",
    ]
    body = [line.split() for line in lines[2:6]]
    assert [row[4] for row in body] == [f"order_date=2026-11-{d}" for d in ("08", "09", "10", "11")]
    assert [row[2] for row in body] == ["-", "checkpoint_committed", "armed", "INVALID"]
    assert [row[5] for row in body] == ["7", "1234", "12", "-"]
    assert body[2][0].startswith("sha256:") and body[2][0].endswith("...")
    assert "dpone guard resolve" in result.stdout


def test_checkpoints_json_has_full_ids_and_nulls(populated: Path) -> None:
    result = invoke("checkpoints", str(populated), "--json")

    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    entries = {e["bounds"]: e for e in payload["partitions"]}
    assert payload["summary"] == {"partitions": 4, "blocked": 2, "invalid_guards": 1}
    legacy = entries["order_date=2026-11-08"]
    assert (legacy["guard_phase"], legacy["checkpoint_batch_id"], legacy["blocked"]) == (None, None, False)
    armed = entries["order_date=2026-11-10"]
    assert armed["partition_id"] == sha256_tag("partition 2026-11-10")
    assert armed["checkpoint_batch_id"] == sha256_tag("batch")
    assert armed["rows"] == 12 and armed["completed_at"] is None
    invalid = entries["order_date=2026-11-11"]
    assert (invalid["guard_phase"], invalid["guard_invalid_reason"]) == (
        "INVALID",
        "unknown guard schema version",
    )
    assert entries["order_date=2026-11-09"]["started_at"] == "2026-11-30T12:00:00+00:00"
    for key in (
        "partition_id",
        "status",
        "guard_phase",
        "checkpoint_batch_id",
        "bounds",
        "rows",
        "started_at",
        "completed_at",
    ):
        assert key in armed


def test_checkpoints_without_a_store_file_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    result = invoke("checkpoints", str(write(tmp_path)))

    assert result.exit_code == 2
    assert "no checkpoint store at" in result.stderr
    assert not (tmp_path / "state.sqlite").exists()


def test_checkpoints_missing_connection_variable_exits_2(tmp_path: Path) -> None:
    text = MANIFEST.replace("connection: sqlite:///state.sqlite", "connection: state_db")
    result = invoke("checkpoints", str(write(tmp_path, text)), env={"AIRFLOW_CONN_STATE_DB": ""})

    assert result.exit_code == 2
    assert "set AIRFLOW_CONN_STATE_DB" in result.stderr


def test_checkpoints_from_env_connection(populated: Path) -> None:
    text = MANIFEST.replace("connection: sqlite:///state.sqlite", "connection: state_db")
    populated.write_text(text, encoding="utf-8")
    env = {
        "AIRFLOW_CONN_STATE_DB": json.dumps(
            {"conn_type": "sqlite", "host": str(populated.parent / "state.sqlite")}
        )
    }
    result = invoke("checkpoints", str(populated), "--json", env=env)

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["partitions"] == 4


# --- output: exit codes, unexpected failures, tables -------------------------------------------------


def probe_command(raise_: BaseException) -> click.Command:
    @click.command()
    @click.option("--json", "as_json", is_flag=True)
    def probe(as_json: bool) -> None:
        with reporting_errors(as_json):
            raise raise_

    return probe


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        (ErrorCode.MANUAL_RECONCILIATION_REQUIRED, 3),
        (ErrorCode.GUARD_INVALID, 3),
        (ErrorCode.MANIFEST_INVALID, 2),
        (ErrorCode.CONNECTION_MISSING, 2),
        (ErrorCode.USAGE, 2),
        (ErrorCode.TARGET_LOAD_FAILED, 1),
        (ErrorCode.QUALITY_CHECK_FAILED, 1),
        (ErrorCode.ROUTE_BUSY, 4),
    ],
)
def test_error_codes_map_to_exit_codes(code: ErrorCode, exit_code: int) -> None:
    err = DponeError(code, "route x is blocked", hint_lines=("inspect: dpone checkpoints m.yaml",))
    result = CliRunner().invoke(probe_command(err), [])

    assert result.exit_code == exit_code
    assert result.stderr.splitlines() == [
        f"error: {code.value}: route x is blocked",
        "  inspect: dpone checkpoints m.yaml",
    ]

    as_json = CliRunner().invoke(probe_command(err), ["--json"])
    assert as_json.exit_code == exit_code
    assert json.loads(as_json.stdout)["error"] == code.value


def test_unexpected_exception_prints_a_generic_line_without_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DPONE_DEBUG", raising=False)
    result = CliRunner().invoke(probe_command(KeyError("password=hunter2")), [])

    assert result.exit_code == 1
    assert result.stderr.startswith("error: unexpected_error: unexpected internal failure (KeyError)")
    assert "hunter2" not in result.output
    assert "Traceback" not in result.output


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPONE_DEBUG", "1")
    result = CliRunner().invoke(probe_command(ValueError("boom")), [])

    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "ValueError: boom" in result.stderr


def test_debug_flag_on_the_root_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPONE_DEBUG", raising=False)
    text = MANIFEST.replace(
        "  strategy: incremental_append\n", "  strategy: incremental_append\n  optoins: {}\n"
    )
    result = invoke("--debug", "manifest", "validate", str(write(tmp_path, text)))

    assert result.exit_code == 2
    assert "Traceback" in result.stderr


def test_render_table_aligns_columns() -> None:
    text = render_table(["NAME", "ROWS", "NOTE"], [["a", 5, None], ["long name", 1234, "x"]])

    assert text.splitlines() == [
        "NAME       ROWS  NOTE",
        "a             5  -",
        "long name  1234  x",
    ]
    with pytest.raises(ValueError):
        render_table(["A", "B"], [["only one"]])


# --- registration and start-up -----------------------------------------------------------------------


def test_version_and_help() -> None:
    assert invoke("--version").stdout.startswith("dpone ")
    help_text = invoke("--help").stdout
    assert "manifest" in help_text and "checkpoints" in help_text
    assert invoke("manifest", "validate", "--help").exit_code == 0


def test_a_listed_command_module_that_is_missing_fails_loudly() -> None:
    group = click.Group("probe")
    assert cli_main.register_commands(group, ("manifest_cmd",)) == ["manifest_cmd"]
    assert "manifest" in group.commands
    with pytest.raises(ModuleNotFoundError):
        cli_main.register_commands(click.Group("probe"), ("manifest_cmd", "no_such_cmd_module"))


def test_modules_without_register_contribute_their_top_level_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dpone_probe_cmds.py").write_text(
        textwrap.dedent(
            """\
            import click

            @click.group("grp")
            def grp():
                pass

            @grp.command("sub")
            def sub():
                pass

            @click.command("solo")
            def solo():
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("dpone_probe_cmds")
    group = click.Group("probe")
    cli_main._register_module(group, module)

    assert sorted(group.commands) == ["grp", "solo"]


def test_the_cli_imports_no_airflow_and_no_vendor_sdk_at_start_up() -> None:
    code = (
        "import sys, airflow_provider_dpone.cli.main\n"
        "heavy = ['airflow', 'sqlalchemy', 'pyarrow', 'clickhouse_connect', 'chdb', 'pymssql', 'psycopg2']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
