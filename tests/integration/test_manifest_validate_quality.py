"""``dpone manifest validate`` rejects what ``dpone run`` rejects in the quality section (issue 14, point 7):
the loader checks the policy, so every entry point reports every problem at once, before anything exists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DPONE = str(Path(sys.executable).with_name("dpone"))

MANIFEST = """\
kind: native_transfer
name: quality_checks
source: {{type: sqlite, connection: 'sqlite:///source.sqlite', table: orders,
  partitioning: {{kind: day, column: order_date}}}}
sink: {{type: clickhouse, connection: 'chdb:///chdb', table: demo.orders, strategy: incremental_append,
  order_by: [order_date, id], options: {{durable_quality_replay: true}}}}
checkpoints: {{connection: 'sqlite:///state.sqlite'}}
quality:
  checks:
{checks}
"""
BAD = """\
    - {type: not_null}
    - {type: row_count, columns: [id]}
    - {type: unique, columns: [id, "bad name"]}
    - {type: distinct_count, columns: [customer, customer]}
"""
GOOD = """\
    - {type: row_count}
    - {type: not_null, columns: [customer, amount]}
    - {type: distinct_count, columns: [customer], severity: warn}
"""


def _dpone(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DPONE, *args], cwd=base, capture_output=True, text=True, timeout=120, check=False)


def test_validate_lists_every_quality_problem_at_once_and_creates_nothing(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(MANIFEST.format(checks=BAD.rstrip("\n")), encoding="utf-8")
    text = _dpone(tmp_path, "manifest", "validate", str(manifest))
    assert text.returncode == 2, text.stdout + text.stderr
    assert "error: manifest_invalid:" in text.stderr and "(4 problems)" in text.stderr
    for index, phrase in (
        (0, "needs at least one column"),
        (1, "takes no columns"),
        (2, "plain identifiers"),
        (3, "same column twice"),
    ):
        assert f"`quality.checks[{index}]` (line {10 + index}): " in text.stderr and phrase in text.stderr
    assert "bad name" not in text.stderr  # no value echoed
    as_json = _dpone(tmp_path, "manifest", "validate", str(manifest), "--json")
    assert as_json.returncode == 2
    problems = json.loads(as_json.stdout or as_json.stderr)["details"]["problems"]
    assert [p["path"] for p in problems] == [f"quality.checks[{i}]" for i in range(4)]
    assert not (tmp_path / "state.sqlite").exists() and not (tmp_path / "chdb").exists()

    run = _dpone(tmp_path, "run", str(manifest), "--run-id", "r1")
    assert run.returncode == 2 and "error: manifest_invalid:" in run.stderr  # the run agrees
    assert "(4 problems)" in run.stderr and "`quality.checks[3]` (line 13)" in run.stderr
    # refused while loading the manifest: no checkpoint database or target was created first
    assert not (tmp_path / "state.sqlite").exists() and not (tmp_path / "chdb").exists()


def test_validate_shows_the_bound_policy_of_a_valid_manifest(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(MANIFEST.format(checks=GOOD.rstrip("\n")), encoding="utf-8")
    text = _dpone(tmp_path, "manifest", "validate", str(manifest))
    assert text.returncode == 0, text.stderr
    assert "quality:   3 check(s): row_count():error, not_null(customer,amount):error" in text.stdout
    as_json = _dpone(tmp_path, "manifest", "validate", str(manifest), "--json")
    policy = json.loads(as_json.stdout)["quality_policy"]
    assert [c["check"] for c in policy["checks"]] == ["row_count", "not_null", "distinct_count"]
