"""Command-line details a newcomer meets: help texts, `--run-id ""`, driver noise, progress, the fixture."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.cli.demo_cmd import DEMO_MANIFEST
from airflow_provider_dpone.cli.main import JSON_HELP, cli
from airflow_provider_dpone.cli.output import dpone_invocation
from airflow_provider_dpone.cli.progress_display import PlainProgress, format_eta, make_progress

REPO = Path(__file__).resolve().parents[2]
DPONE = Path(sys.executable).with_name("dpone")


def all_commands(group: click.Group, prefix: str = "dpone") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        found.append((f"{prefix} {name}", command))
        if isinstance(command, click.Group):
            found.extend(all_commands(command, f"{prefix} {name}"))
    return found


# --- help ---------------------------------------------------------------------------------------------


def test_every_json_flag_has_help_text() -> None:
    with_json = [
        (path, param)
        for path, command in all_commands(cli)
        for param in command.params
        if isinstance(param, click.Option) and "--json" in param.opts
    ]
    assert len(with_json) >= 8  # run, demo, checkpoints, manifest validate, guard x2, replay x2 at least
    for path, param in with_json:
        assert param.help, f"{path} --json has no help"
    result = CliRunner().invoke(cli, ["guard", "inspect", "--help"])
    assert "--json" in result.stdout and JSON_HELP.split()[0] in result.stdout


@pytest.mark.parametrize(
    "group_args", [[], ["guard"], ["replay"], ["manifest"]], ids=["dpone", "guard", "replay", "manifest"]
)
def test_help_listings_show_whole_command_summaries(group_args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*group_args, "--help"], terminal_width=80)
    assert result.exit_code == 0
    listing = result.stdout.split("Commands:", 1)[1]
    assert "..." not in listing
    group = cli
    for name in group_args:
        group = group.commands[name]  # type: ignore[assignment]
    assert isinstance(group, click.Group)
    flat = " ".join(listing.split())
    for command in group.commands.values():
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert first in flat, f"summary of {command.name} is cut"


# --- --run-id "" --------------------------------------------------------------------------------------


def demo_manifest(tmp_path: Path, rows: int = 200) -> Path:
    create_demo_source(tmp_path / "source.sqlite", rows)
    path = tmp_path / "manifest.yaml"
    path.write_text(DEMO_MANIFEST, encoding="utf-8")
    return path


@pytest.mark.parametrize("value", ["", "   "])
def test_run_with_an_empty_run_id_is_refused_before_anything(tmp_path: Path, value: str) -> None:
    manifest = demo_manifest(tmp_path)
    result = CliRunner().invoke(cli, ["run", str(manifest), "--run-id", value], catch_exceptions=False)
    assert result.exit_code == 2
    assert "error: usage_error: --run-id is empty" in result.stderr
    assert not (tmp_path / "state.sqlite").exists()  # no store, no checkpoint, no target
    assert not (tmp_path / "clickhouse").exists()


def test_replay_commands_refuse_an_empty_run_id(tmp_path: Path) -> None:
    manifest = demo_manifest(tmp_path)
    status = CliRunner().invoke(cli, ["replay", "status", str(manifest), "--run-id", "", "--json"])
    assert status.exit_code == 2
    assert json.loads(status.stdout)["message"].startswith("--run-id is empty")
    resolve = CliRunner().invoke(
        cli, ["replay", "resolve", str(manifest), "--run-id", "", "--as", "failed", "--reason", "x"]
    )
    assert resolve.exit_code == 2
    assert "--run-id is empty" in resolve.stderr


# --- driver noise ---------------------------------------------------------------------------------------


def test_an_unreachable_server_prints_only_the_cli_error(tmp_path: Path) -> None:
    manifest = demo_manifest(tmp_path)
    manifest.write_text(DEMO_MANIFEST.replace("chdb:///clickhouse", "ch_down"), encoding="utf-8")
    env = {
        **os.environ,
        "AIRFLOW_CONN_CH_DOWN": json.dumps({"conn_type": "clickhouse", "host": "127.0.0.1", "port": 1}),
    }
    done = subprocess.run(
        [str(DPONE), "run", str(manifest), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"] == "target_unreachable"
    assert done.stderr == ""  # no "Unexpected Http Driver Exception" from the driver's logger
    text = subprocess.run(
        [str(DPONE), "run", str(manifest)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    lines = [line for line in text.stderr.splitlines() if not line.startswith(("plan:", "  "))]
    assert lines == [lines[0]] and lines[0].startswith("error: target_unreachable:")


# --- progress -------------------------------------------------------------------------------------------


def test_plain_progress_lines_count_partitions_rows_and_eta() -> None:
    out = io.StringIO()
    progress = PlainProgress(out)
    progress.plan_ready(3, 2)
    progress.partition_moved("order_date=2026-11-01", 1000, 0.5)
    progress.stage("commit")
    lines = out.getvalue().splitlines()
    assert lines[0] == "plan: 3 partition(s) to move, skipping 2 already committed"
    assert lines[1].startswith("  [1/3] order_date=2026-11-01")
    assert "1,000 rows" in lines[1] and "2,000 rows/s" in lines[1] and "total 1,000 rows" in lines[1]
    assert "eta 0:00:0" in lines[1]
    assert lines[2] == "commit: writing checkpoints"
    assert format_eta(None) == "-" and format_eta(3725) == "1:02:05"


def test_no_progress_with_json_and_plain_lines_off_a_terminal() -> None:
    assert make_progress(True) is None
    assert isinstance(make_progress(False, io.StringIO()), PlainProgress)


def _run_in_pty(args: list[str], cwd: Path) -> str:
    """Run with stderr (and stdout) on a pseudo-terminal, as a user at a shell would; returns what it drew."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "150", "TERM": "xterm"}
    proc = subprocess.Popen(args, cwd=cwd, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    poller = select.poll()
    poller.register(leader, select.POLLIN)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if poller.poll(500):  # poll, not select: select cannot watch a descriptor above 1023
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(leader)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_a_live_bar_and_a_pipe_gets_plain_lines(tmp_path: Path) -> None:
    manifest = demo_manifest(tmp_path, rows=3000)
    drawn = _run_in_pty([str(DPONE), "run", str(manifest), "--run-id", "tty"], tmp_path)
    assert "60/60" in drawn and "partitions" in drawn and "rows/s" in drawn and "eta" in drawn
    assert "\x1b[" in drawn  # drawn by rich (cursor control), not printed line by line
    assert "[60/60]" not in drawn
    (tmp_path / "again").mkdir()
    manifest2 = demo_manifest(tmp_path / "again", rows=3000)
    piped = subprocess.run(
        [str(DPONE), "run", str(manifest2)], capture_output=True, text=True, timeout=180, check=False
    )
    assert piped.returncode == 0, piped.stderr
    assert "\x1b[" not in piped.stderr
    assert "[60/60]" in piped.stderr and "eta -" in piped.stderr
    assert piped.stdout.startswith("route ")  # the report stays on stdout


def test_json_output_is_the_only_thing_on_stdout(tmp_path: Path) -> None:
    manifest = demo_manifest(tmp_path)
    done = subprocess.run(
        [str(DPONE), "run", str(manifest), "--json"], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows_committed"] == 200
    assert done.stderr == ""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 200


# --- how to run dpone again -------------------------------------------------------------------------------


def test_dpone_invocation_names_the_program_that_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program = tmp_path / "venv" / "bin" / "dpone"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n", encoding="utf-8")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert dpone_invocation(str(program)) == str(program)  # not on PATH: its full path
    monkeypatch.setenv("PATH", f"{program.parent}:/usr/bin:/bin")
    assert dpone_invocation(str(program)) == "dpone"
    assert dpone_invocation("dpone") == "dpone"
    assert dpone_invocation("/usr/bin/pytest").endswith("-m airflow_provider_dpone.cli.main")


# --- the private_clickhouse fixture ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "outcome", "text"),
    [
        ({}, "1 error", "DPONE_TEST_AUTOSTART=0 forbids starting one"),
        ({"DPONE_ALLOW_SKIP": "1"}, "1 skipped", "DPONE_TEST_AUTOSTART=0 forbids starting one"),
    ],
    ids=["fails", "skips-when-allowed"],
)
def test_private_clickhouse_honours_autostart_off(extra: dict[str, str], outcome: str, text: str) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DPONE_TEST_PRIVATE_CLICKHOUSE", "DPONE_ALLOW_SKIP")
    }
    env.update({"DPONE_TEST_AUTOSTART": "0", **extra})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/integration/test_services_smoke.py::test_private_clickhouse_server_can_be_killed_for_fault_tests",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert outcome in done.stdout, done.stdout
    assert text in done.stdout
