"""A replacing route edited back re-runs a day another definition replaced, whatever that one did since.

Definition A (``id % 2 = 0``) commits a day; definition B (``id % 2 = 1``) of the same route replaces it
(allowed); B's lookback retry of the day fails a quality check before the target; the manifest is edited
back to A. Red before: B's failed record, the day's latest, hid its commit, A skipped its day as committed
and the target kept only B's rows, exit 0. Now A's run compares the two reads as it does when B's commit is
the day's latest: it stops (B's rows would go), and goes on when allowed. Black-box ``dpone`` runs: SQLite
source, chDB target, the checkpoint store on SQLite and PostgreSQL; target values compared with the source's.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from tests.integration.route_rig import dpone
from tests.integration.windowed_rig import UNIQUE_V, ev_route, ran, refusal, source, target, write_source

START = dt.datetime(2026, 3, 6)
#: a row every 30 minutes over one day: (id, ts, v); v is unique
ROWS = [(i, (START + dt.timedelta(minutes=30 * i)).isoformat(sep=" "), i * 7) for i in range(48)]
EVEN, ODD = "id % 2 = 0", "id % 2 = 1"


@pytest.fixture
def root(tmp_path: Path, store_url: str) -> Path:
    """The source; manifests reach the store (SQLite or PostgreSQL) as connection ``spelling_state``."""
    return write_source(tmp_path, ROWS)


def set_v(root: Path, row_id: int, value: int) -> None:
    with sqlite3.connect(root / "source.sqlite") as db:
        db.execute("UPDATE ev SET v = ? WHERE id = ?", (value, row_id))


@pytest.mark.parametrize("b_retry", ["committed", "failed before the target"])
def test_a_definition_edited_back_reruns_a_day_the_other_replaced_under_its_failed_retry(
    root: Path, b_retry: str
) -> None:
    a = ev_route(root, EVEN)
    b = ev_route(root, ODD, lookback=1, quality=UNIQUE_V)
    ran(a)
    assert target(root) == source(root, EVEN)
    ran(b, "--allow-nonempty-target")
    assert target(root) == source(root, ODD)
    if b_retry == "committed":
        ran(b)  # the lookback moves its day again
    else:
        set_v(root, 3, 7)  # id 1's v: the retry's unique check fails before arming
        failed = dpone("run", str(b))
        assert failed.exit_code != 0 and "quality_check_failed" in failed.output, failed.output
        set_v(root, 3, 21)
    assert target(root) == source(root, ODD)

    error = refusal(dpone("run", str(a), "--json"))

    assert error["details"]["problem"] == "rows_left_out_by_new_definition"
    assert error["details"]["partitions"] == ["ts=2026-03-06"] and error["details"]["rows"] == 24
    assert target(root) == source(root, ODD)  # nothing deleted

    again = ran(a, "--allow-nonempty-target", "--json")

    assert json.loads(again)["rows_committed"] == 24
    assert target(root) == source(root, EVEN)
    skipped = dpone("run", str(a), "--json")  # nothing replaced it since: skipped as committed
    assert skipped.exit_code == 0 and json.loads(skipped.output)["rows_committed"] == 0, skipped.output
    assert target(root) == source(root, EVEN)
