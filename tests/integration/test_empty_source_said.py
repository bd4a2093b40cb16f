"""A replacing route over a source that holds no rows says what happened to the target, and never claims
that every partition is committed when the source planned none.

A partitioned route plans nothing from an empty source and keeps the target (by design: a reload may be in
progress); a route without partitioning replaces the target with no rows. Both used to go on in silence.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.route_rig import ROWS, dpone, manifest_at, source_rows, target_rows

STATE = "sqlite:///state.sqlite"
NO_PARTITION = "nothing to do: the source holds no rows to plan a partition from"


def _empty_the_source(base: Path) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("DELETE FROM orders")


def _run_json(manifest: Path) -> dict[str, object]:
    result = dpone("run", str(manifest), "--json")
    assert result.exit_code == 0, result.output
    report: dict[str, object] = json.loads(result.output.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize(
    ("strategy", "lookback"), [("full_refresh", ""), ("replace_partition", ", lookback: 2")]
)
def test_a_partitioned_replacing_route_keeps_the_target_and_says_so(
    base: Path, monkeypatch: pytest.MonkeyPatch, strategy: str, lookback: str
) -> None:
    monkeypatch.chdir(base)
    manifest = manifest_at(base, strategy=strategy, state=STATE)
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("column: order_date}", f"column: order_date{lookback}}}"))
    assert dpone("run", str(manifest)).exit_code == 0
    loaded = source_rows(base)
    assert len(loaded) == ROWS and target_rows(base) == loaded

    _empty_the_source(base)
    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert NO_PARTITION in result.output
    assert "every partition is already committed" not in result.output
    assert "keeps every row earlier runs committed" in result.output
    assert target_rows(base) == loaded  # nothing replaced: every value as it was committed
    verify = dpone("checkpoints", str(manifest), "--verify")
    assert "4 drifted partitions" in verify.output
    remedy = "the next full refresh" if strategy == "full_refresh" else "source.partitioning.lookback"
    assert remedy in next(line for line in verify.output.splitlines() if line.startswith("drift:"))
    report = _run_json(manifest)
    assert report["partitions"] == []
    assert any("holds no rows its partitioning places" in n for n in report["notices"])  # type: ignore[attr-defined]


def test_a_full_refresh_without_partitioning_says_it_emptied_the_target(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(base)
    manifest = manifest_at(base, strategy="full_refresh", kind="none", state=STATE)
    first = _run_json(manifest)
    assert first["notices"] == []
    assert target_rows(base) == source_rows(base)

    _empty_the_source(base)
    report = _run_json(manifest)

    assert report["rows_committed"] == 0 and report["partitions_committed"] == 1
    assert target_rows(base) == []
    notices = report["notices"]
    assert isinstance(notices, list)
    assert any("read no rows from the source" in n and "demo.orders is now empty" in n for n in notices)


def test_an_append_route_over_an_empty_source_is_told_apart_from_one_with_all_committed(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(base)
    manifest = manifest_at(base, strategy="incremental_append", state=STATE)
    assert dpone("run", str(manifest)).exit_code == 0
    again = dpone("run", str(manifest))
    assert "nothing to do: every partition is already committed" in again.output

    loaded = target_rows(base)
    _empty_the_source(base)
    result = dpone("run", str(manifest))

    assert result.exit_code == 0, result.output
    assert NO_PARTITION in result.output
    assert "note:" not in result.output  # an append route keeps its rows whatever the source holds
    assert target_rows(base) == loaded


def test_a_terminal_shows_each_notice_once_and_before_the_summary(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real process, stdout and stderr together as a terminal shows them: the run's notice is printed once
    (not again by logging's fallback on stderr), as it is made, before the summary."""
    monkeypatch.chdir(base)
    manifest = manifest_at(base, strategy="full_refresh", state=STATE)
    assert dpone("run", str(manifest)).exit_code == 0
    _empty_the_source(base)

    shown = subprocess.run(
        [sys.executable, "-m", "airflow_provider_dpone.cli.main", "run", str(manifest)],
        cwd=base,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
        check=False,
    )

    assert shown.returncode == 0, shown.stdout
    assert shown.stdout.count("keeps every row earlier runs committed") == 1, shown.stdout
    lines = shown.stdout.splitlines()
    note = next(i for i, line in enumerate(lines) if line.startswith("  note: the source of route"))
    summary = next(i for i, line in enumerate(lines) if line.startswith("route main.orders -> demo.orders"))
    assert note < summary


def test_a_day_a_later_full_refresh_replaced_is_superseded_not_drifted_for_good(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source emptied one day; the next refreshes replaced the whole table without it (the target is
    right), yet ``--verify`` listed that day's first commit as DRIFTED on every check, and the remedy it named
    (another full refresh) never cleared it."""
    monkeypatch.chdir(base)
    manifest = manifest_at(base, strategy="full_refresh", state=STATE)
    assert dpone("run", str(manifest)).exit_code == 0
    with sqlite3.connect(base / "source.sqlite") as db:
        (emptied,) = db.execute("SELECT max(order_date) FROM orders").fetchone()
        db.execute("DELETE FROM orders WHERE order_date = ?", (emptied,))
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)

    verify = dpone("checkpoints", str(manifest), "--verify", "--json")

    report = json.loads(verify.output)
    assert report["summary"]["drifted"] == 0, verify.output
    superseded = [e["bounds"] for e in report["partitions"] if e["superseded"]]
    assert superseded == [f"order_date={emptied}"]
    assert "superseded" in dpone("checkpoints", str(manifest), "--verify").output
