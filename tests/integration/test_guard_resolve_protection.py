"""``dpone guard resolve`` refuses the answer that would duplicate, on a real target (chDB)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import (
    TARGET,
    add_a_new_day,
    append_armed,
    chdb_command,
    dpone,
    hold_lease,
    latest_of,
    manifest_at,
    source_rows,
    target_rows,
    write_manifest,
)


def dpone_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``dpone`` in a process of its own: this one's embedded target cannot open another folder."""
    command = [str(Path(sys.executable).with_name("dpone")), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)


def blocked_after_a_landed_append(base: Path, store_url: str) -> Path:
    """Every partition's rows are in the target; two partitions' latest rows say EXPORTED/armed."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    append_armed(store_url, latest_of(store_url, load_manifest(manifest).route), how_many=2)
    return manifest


def test_not_applied_over_rows_in_the_target_is_refused_with_the_counts(
    base: Path,
    store_url: str,
) -> None:
    manifest = blocked_after_a_landed_append(base, store_url)

    refused = dpone(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "not-applied", "--reason", "x"
    )

    assert refused.exit_code == 2, refused.output
    assert "refusing --as not-applied" in refused.output and "row(s) within its bounds" in refused.output
    again = dpone("run", str(manifest))
    assert again.exit_code == 3, again.output  # still blocked: nothing was written
    assert target_rows(base) == source_rows(base)


def test_committed_after_checking_the_target_unblocks_without_duplicating(
    base: Path,
    store_url: str,
) -> None:
    manifest = blocked_after_a_landed_append(base, store_url)

    resolved = dpone(
        "guard",
        "resolve",
        str(manifest),
        "--all-blocked",
        "--as",
        "committed",
        "--reason",
        "counted",
        "--json",
    )

    assert resolved.exit_code == 0, resolved.output
    audits = [r["diagnostics"]["resolution"] for r in json.loads(resolved.stdout)["resolved"]]
    assert all(a["target_rows"] == a["attempt_rows"] and a["forced"] is False for a in audits)
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_force_overrides_the_refusal_and_is_audited(base: Path, store_url: str) -> None:
    manifest = blocked_after_a_landed_append(base, store_url)

    forced = dpone(
        "guard",
        "resolve",
        str(manifest),
        "--all-blocked",
        "--as",
        "not-applied",
        "--reason",
        "y",
        "--force",
        "--json",
    )

    assert forced.exit_code == 0, forced.output
    assert all(r["diagnostics"]["resolution"]["forced"] for r in json.loads(forced.stdout)["resolved"])
    # the listing says the phase came from an operator's resolution, not from a failure before the target
    listing = json.loads(dpone("checkpoints", str(manifest), "--json").stdout)["partitions"]
    resolved = [e for e in listing if e["resolved_as"] is not None]
    assert len(resolved) == 2 and {e["resolved_as"] for e in resolved} == {"not-applied"}
    assert "failed_before_target (resolved not-applied)" in dpone("checkpoints", str(manifest)).output


def test_a_resolution_while_a_run_of_the_target_is_live_stops_busy_and_writes_nothing(
    base: Path,
    store_url: str,
) -> None:
    """A live run's ARMED partitions look blocked; resolving them while it loads (``not-applied`` before
    its insert lands) would let the next run append them again. ``guard resolve`` takes the target's
    lease, as a run does: while another process holds it, it stops with exit 4 and appends nothing."""
    manifest = blocked_after_a_landed_append(base, store_url)
    route = load_manifest(manifest).route
    before = latest_of(store_url, route)
    holder = hold_lease(store_url)
    try:
        busy = dpone("guard", "resolve", str(manifest), "--all-blocked", "--as", "committed", "--reason", "x")
        assert busy.exit_code == 4, busy.output
        assert "native_transfer_route_busy" in busy.output
        assert latest_of(store_url, route) == before  # nothing appended
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert TARGET in busy.output
    resolved = dpone("guard", "resolve", str(manifest), "--all-blocked", "--as", "committed", "--reason", "x")
    assert resolved.exit_code == 0, resolved.output
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_committed_over_a_partition_the_target_holds_none_of_is_refused_and_counted_rows_are_recorded(
    base: Path, store_url: str
) -> None:
    """A direct load's armed record knows no rows: `--as committed` over a partition whose rows never reached
    the target recorded it committed with rows unknown, and no run would ever move or miss those rows."""
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    committed = latest_of(store_url, load_manifest(manifest).route)
    reached, missing = sorted(committed, key=lambda c: c.bounds.label)[:2]
    armed = TargetCommitGuard.for_phase(GuardPhase.ARMED, "sha256:" + "cd" * 32).to_json()
    with SqlCheckpointStore(store_url) as store:  # what a direct attempt leaves: EXPORTED/armed, rows unknown
        store.write_batch(
            [
                c.model_copy(
                    update={
                        "status": CheckpointStatus.EXPORTED,
                        "completed_at": None,
                        "rows": None,
                        "diagnostics": {GUARD_KEY: armed},
                    }
                )
                for c in (reached, missing)
            ]
        )
    day = missing.bounds.lower
    chdb_command(base, f"ALTER TABLE {TARGET} DELETE WHERE order_date = '{day}' SETTINGS mutations_sync = 2")

    refused = dpone("guard", "resolve", str(manifest), "--all-blocked", "--as", "committed", "--reason", "x")

    assert refused.exit_code == 2, refused.output
    assert "refusing --as committed" in refused.output and missing.bounds.label in refused.output
    assert reached.bounds.label not in refused.output.split("refusing")[1].split("If the attempt")[0]
    again = dpone("run", str(manifest))
    assert again.exit_code == 3, again.output  # nothing was written: still blocked

    one = dpone(
        "guard",
        "resolve",
        str(manifest),
        "--partition",
        reached.partition_id,
        "--as",
        "committed",
        "--reason",
        "counted",
        "--json",
    )
    assert one.exit_code == 0, one.output
    (record,) = json.loads(one.stdout)["resolved"]
    assert record["rows"] == reached.rows and record["diagnostics"]["resolution"]["attempt_rows"] is None
    other = dpone(
        "guard",
        "resolve",
        str(manifest),
        "--partition",
        missing.partition_id,
        "--as",
        "not-applied",
        "--reason",
        "deleted",
    )
    assert other.exit_code == 0, other.output
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def test_a_resolution_counting_another_target_than_the_attempt_wrote_is_refused(
    base: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before: the sink connection led to another environment's target (the same connection name in an
    on-call shell), whose counts matched the source; ``committed`` was recorded, and every later run of the
    real target skipped the day it never received, exit 0 (149,000 rows missing, seen)."""
    from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink

    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    add_a_new_day(base)

    def load_fails(*_: Any, **__: Any) -> int:
        raise RuntimeError("the target call failed (test)")

    with monkeypatch.context() as patched:
        patched.setattr(ClickHouseSink, "load", load_fails)
        failed = dpone("run", str(manifest))  # armed, then the target call failed: the new day is blocked
    assert failed.exit_code == 1, failed.output
    staging = manifest_at(base, state="sqlite:///staging.sqlite", file="staging.yaml")
    staging.write_text(staging.read_text("utf-8").replace("chdb:///clickhouse", "chdb:///copy"), "utf-8")
    assert dpone_process("run", str(staging)).returncode == 0  # another target, holding every row
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("chdb:///clickhouse", "chdb:///copy"), encoding="utf-8")

    refused = dpone_process(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "committed", "--reason", "x"
    )

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "another target" in refused.stderr and "AIRFLOW_CONN_" in refused.stderr
    manifest.write_text(text, encoding="utf-8")
    again = dpone("run", str(manifest))
    assert again.exit_code == 3, again.output  # nothing was written: still blocked
    resolved = dpone(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "not-applied", "--reason", "x"
    )
    assert resolved.exit_code == 0, resolved.output
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def _refusing_commits(write_batch: Any) -> Any:
    """A store's ``write_batch`` that refuses the COMMITTED records (the target call had succeeded)."""
    from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

    def refuse_commits(self: SqlCheckpointStore, checkpoints: Any) -> None:
        if any(c.status is CheckpointStatus.COMMITTED for c in checkpoints):
            raise DponeError(
                ErrorCode.CHECKPOINT_STORE_FAILED, "checkpoint store operation write_batch failed"
            )
        write_batch(self, checkpoints)

    return refuse_commits


def test_a_commit_the_store_failed_to_write_says_the_route_is_blocked_and_what_to_run(
    base: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target call succeeded, then the store refused the COMMITTED records: the run used to end on one
    bare ``checkpoint_store_failed`` line, not saying the route was now blocked or what to run next."""
    manifest = write_manifest(base, "orders", store_url)
    write_batch = SqlCheckpointStore.write_batch
    refuse_commits = _refusing_commits(write_batch)

    monkeypatch.setattr(SqlCheckpointStore, "write_batch", refuse_commits)
    failed = CliRunner().invoke(cli, ["run", str(manifest)])
    monkeypatch.setattr(SqlCheckpointStore, "write_batch", write_batch)

    assert failed.exit_code != 0
    assert "checkpoint_store_failed" in failed.stderr
    assert "the route is now blocked: the checkpoint store failed" in failed.stderr
    assert "dpone guard" in failed.stderr  # the blocked route's own next steps
    again = dpone("run", str(manifest))
    assert again.exit_code == 3, again.output


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_the_blocked_routes_next_steps_quote_the_manifest_path_and_json_says_it_is_blocked(
    base: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    """Red before: after a failure that left the route blocked, the next steps printed the manifest path
    as given (a folder with a space split the pasted command; a ``$(...)`` in it would have run), and
    ``--json`` held nothing saying the route was blocked (the text's lines are hints, not details)."""
    import shlex

    manifest = write_manifest(base, "orders", store_url)
    spaced = base.parent / f"{base.name} a dir $(echo x)"
    spaced.symlink_to(base, target_is_directory=True)
    given = str(spaced / manifest.name)
    write_batch = SqlCheckpointStore.write_batch
    refuse_commits = _refusing_commits(write_batch)

    monkeypatch.setattr(SqlCheckpointStore, "write_batch", refuse_commits)
    failed = CliRunner().invoke(cli, ["run", given, *(["--json"] if as_json else [])])
    monkeypatch.setattr(SqlCheckpointStore, "write_batch", write_batch)

    assert failed.exit_code == 1
    if as_json:
        details = json.loads(failed.stdout)["details"]
        assert details["route_blocked"] is True
        assert len(details["blocked_partitions"]) == 4  # every day of the attempt, not the failing call's
        return
    steps = [
        line for line in failed.stderr.splitlines() if "dpone guard" in line or "dpone checkpoints" in line
    ]
    assert steps and all(shlex.quote(given) in line for line in steps), steps
