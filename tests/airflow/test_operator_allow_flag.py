"""``allow_nonempty_target`` of the operator is a boolean, or a template rendered to one for one DAG run.

Red before: the argument was no template field and any truthy value counted, so the per-run form a DAG
writes to clear one stopped run, ``"{{ dag_run.conf.get('allow_nonempty_target', False) }}"``, was never
rendered and its text let every run through: an hourly window's run deleted the hour before it, with
success. Now the field is rendered, a rendered ``true`` / ``false`` is taken, and anything else fails the
task before the run (at parse time where it is no template). Real runs in process: SQLite source, chDB
target, SQLite checkpoint store; the target compared with the source row by row.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.operators.native_transfer import (  # the Airflow version's own class
    AirflowFailException,
    DponeTaskFailed,
    NativeTransferOperator,
)
from tests.builders import chdb_endpoint

START = dt.datetime(2026, 3, 6)
ROWS = [(i, (START + dt.timedelta(minutes=30 * i)).isoformat(sep=" "), i * 7) for i in range(48)]
PER_RUN = "{{ dag_run.conf.get('allow_nonempty_target', False) }}"


def hour_window(hour: int) -> str:
    return f"ts >= '2026-03-06 {hour:02d}:00' AND ts < '2026-03-06 {hour + 1:02d}:00'"


def manifest(root: Path, hour: int) -> dict[str, Any]:
    """A route whose ``source.query`` is an hourly window on day partitions (as a DAG renders it)."""
    return {
        "kind": "native_transfer",
        "name": "ev",
        "source": {
            "type": "sqlite",
            "connection": f"sqlite:///{root / 'source.sqlite'}",
            "table": "ev",
            "query": f"SELECT * FROM ev WHERE {hour_window(hour)}",
            "partitioning": {"kind": "day", "column": "ts"},
        },
        "sink": {
            "type": "clickhouse",
            "connection": f"chdb:///{root / 'clickhouse'}",
            "table": "demo.ev",
            "strategy": "replace_partition",
            "order_by": ["ts", "id"],
        },
        "checkpoints": {"connection": f"sqlite:///{root / 'state.sqlite'}"},
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, ts DATETIME NOT NULL, v INTEGER)")
        db.executemany("INSERT INTO ev VALUES (?, ?, ?)", ROWS)
    return tmp_path


def source(root: Path, where: str) -> list[tuple[int, str, int]]:
    with sqlite3.connect(root / "source.sqlite") as db:
        rows = db.execute(f"SELECT id, ts, v FROM ev WHERE {where} ORDER BY id").fetchall()
    return [(int(i), str(ts), int(v)) for i, ts, v in rows]


def target(root: Path) -> list[tuple[int, str, int]]:
    client = open_client(chdb_endpoint(root / "clickhouse"))
    try:
        rows = client.query("SELECT id, toString(ts), v FROM demo.ev ORDER BY id").result_rows
    finally:
        client.close()
    return [(int(i), str(ts), int(v)) for i, ts, v in rows]


def run(root: Path, hour: int, allow: bool | str, conf: dict[str, Any] | None = None) -> None:
    """One task of the hour's window: its template fields rendered with ``conf`` (None: not rendered)."""
    operator = NativeTransferOperator(
        task_id=f"h{hour}", manifest=manifest(root, hour), allow_nonempty_target=allow
    )
    context: dict[str, Any] = {"run_id": f"scheduled__2026-03-06T{hour:02d}:00:00+00:00"}
    if conf is not None:
        context["dag_run"] = SimpleNamespace(conf=conf)
        operator.render_template_fields(context)
    operator.execute(context)


@pytest.mark.parametrize("value", ["yes", "True", 1, None])
def test_a_value_that_is_neither_a_boolean_nor_a_template_is_refused_at_parse_time(value: object) -> None:
    with pytest.raises(ValueError, match="allow_nonempty_target must be True or False"):
        NativeTransferOperator(task_id="t", manifest="orders.yaml", allow_nonempty_target=value)  # type: ignore[arg-type]


def test_the_flag_is_a_template_field() -> None:
    assert "allow_nonempty_target" in NativeTransferOperator.template_fields


def test_a_template_never_rendered_fails_the_task_before_the_run(root: Path) -> None:
    run(root, 9, False)

    with pytest.raises(AirflowFailException, match="a template left unrendered") as caught:
        run(root, 10, PER_RUN)  # executed as written: no rendering

    assert "dag_run.conf" not in str(caught.value)  # the value is never shown
    assert target(root) == source(root, hour_window(9))  # nothing deleted


def test_a_template_renders_per_run_and_only_a_rendered_true_lets_the_rows_go(root: Path) -> None:
    run(root, 9, PER_RUN, conf={})  # renders False

    with pytest.raises(DponeTaskFailed, match="this definition's read does not return"):
        run(root, 10, PER_RUN, conf={})  # False: the comparison stops the run
    assert target(root) == source(root, hour_window(9))
    with pytest.raises(AirflowFailException, match="must be True or False"):
        run(root, 10, PER_RUN, conf={"allow_nonempty_target": "yes"})
    assert target(root) == source(root, hour_window(9))

    run(root, 10, PER_RUN, conf={"allow_nonempty_target": True})  # this DAG run only

    assert target(root) == source(root, hour_window(10))
    with pytest.raises(DponeTaskFailed, match="this definition's read does not return"):
        run(root, 11, PER_RUN, conf={})  # the next DAG run stops again
    assert target(root) == source(root, hour_window(10))
