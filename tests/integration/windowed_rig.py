"""The rig of the windowed-query tests: a ``replace_partition`` route by day whose ``source.query`` a run renders.

Black-box like ``route_rig``: an ``ev`` table (id, ts, v[, deleted]) in ``base/source.sqlite`` read into the
workspace's chDB ``demo.ev``; both sides read back as (id, ts, v) so a test compares target values with the
source's. Manifests are written from dicts at a file named for their content: the same route, the same file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from click.testing import Result

from tests.integration.route_rig import chdb_query, dpone

#: ``ev``'s columns; a row of four values also fills ``deleted``
EV_COLUMNS = ("id INTEGER PRIMARY KEY", "ts DATETIME NOT NULL", "v INTEGER", "deleted INTEGER")
#: the check a retry fails once a test gives two rows one ``v``
UNIQUE_V = ({"type": "unique", "columns": ["v"]},)

Row = tuple[int, str, int]


def write_source(base: Path, rows: Sequence[tuple[Any, ...]]) -> Path:
    """``base/source.sqlite`` holding ``rows`` in table ``ev``; returns ``base``."""
    columns = EV_COLUMNS[: len(rows[0])]
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(f"CREATE TABLE ev ({', '.join(columns)})")
        db.executemany(f"INSERT INTO ev VALUES ({', '.join('?' * len(columns))})", rows)
    return base


def replacing_route(
    base: Path,
    source: dict[str, Any],
    *,
    name: str,
    target: str,
    order_by: Sequence[str],
    state: str,
    quality: Sequence[dict[str, Any]] = (),
) -> Path:
    """A ``replace_partition`` route from ``source`` (the manifest's block) into the workspace's chDB."""
    sink = {
        "type": "clickhouse",
        "connection": "chdb:///clickhouse",
        "table": target,
        "strategy": "replace_partition",
        "order_by": list(order_by),
    }
    route: dict[str, Any] = {
        "kind": "native_transfer",
        "name": name,
        "source": source,
        "sink": sink,
        "checkpoints": {"connection": state},
    }
    if quality:
        route["quality"] = {"checks": [dict(check) for check in quality]}
    text = yaml.safe_dump(route, sort_keys=False)
    path = base / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def ev_route(
    base: Path,
    where: str,
    *,
    lookback: int | None = None,
    select: str = "*",
    columns: Sequence[str] = (),
    order_by: Sequence[str] = ("ts", "id"),
    state: str = "spelling_state",
    quality: Sequence[dict[str, Any]] = (),
) -> Path:
    """The ``ev`` route reading ``SELECT {select} FROM ev WHERE {where}``, as a DAG renders its data
    interval; ``state`` is the checkpoint store's connection (``spelling_state``: the ``store_url`` fixture's)."""
    source: dict[str, Any] = {
        "type": "sqlite",
        "connection": "sqlite:///source.sqlite",
        "table": "ev",
        "query": f"SELECT {select} FROM ev WHERE {where}",
    }
    if columns:
        source["columns"] = list(columns)
    source["partitioning"] = {"kind": "day", "column": "ts"} | ({"lookback": lookback} if lookback else {})
    return replacing_route(
        base, source, name="ev", target="demo.ev", order_by=order_by, state=state, quality=quality
    )


def window(low: str, high: str) -> str:
    """The filter of a data interval [low, high) on ``ts``."""
    return f"ts >= '{low}' AND ts < '{high}'"


def source(base: Path, where: str) -> list[Row]:
    """The source's (id, ts, v) that ``where`` selects, by id."""
    with sqlite3.connect(base / "source.sqlite") as db:
        rows = db.execute(f"SELECT id, ts, v FROM ev WHERE {where} ORDER BY id").fetchall()
    return [(int(i), str(ts), int(v)) for i, ts, v in rows]


def target(base: Path) -> list[Row]:
    """The target's (id, ts, v), by id, printed as the source holds them."""
    rows = chdb_query(base, "SELECT id, toString(ts), v FROM demo.ev ORDER BY id")
    return [(int(i), str(ts), int(v)) for i, ts, v in rows]


def ran(path: Path, *flags: str) -> str:
    """The output of a ``dpone run`` that exited 0."""
    result = dpone("run", str(path), *flags)
    assert result.exit_code == 0, result.output
    return result.output


def refusal(result: Result) -> dict[str, Any]:
    """The error of a ``dpone run --json`` that stopped before arming (exit 3)."""
    assert result.exit_code == 3, result.output
    error: dict[str, Any] = json.loads(result.output[result.output.index("{") :])
    return error
