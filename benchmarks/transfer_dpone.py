"""dpone measured as a user runs it: ``compose.open_runtime(load_manifest(path)).run(run_id)``.

Everything the run imports lazily (checkpoint store, source, sink, artifacts, the ClickHouse driver and
chDB) is imported before the clock starts, so ``seconds`` is the run itself: planning, the guard's
checkpoint writes, the transfer and the evidence. The parent's end-to-end time includes the imports.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

from clock import Clock

MANIFEST_TEMPLATE = """\
kind: native_transfer
name: bench_{shape}
source:
  type: sqlite
  connection: sqlite:///{source}
  table: {shape}
  partitioning:
    kind: day
    column: order_date
  export: {export}
  chunk_rows: {chunk_rows}
sink:
  type: clickhouse
  connection: {sink}
  table: {table}
  strategy: incremental_append
  load: {load}
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///{state}
"""

_PRELOAD = (
    "airflow_provider_dpone.compose",
    "airflow_provider_dpone.manifests.loader",
    "airflow_provider_dpone.adapters.checkpoint_sql",
    "airflow_provider_dpone.adapters.sources.factory",
    "airflow_provider_dpone.adapters.sources.sqlite_source",
    "airflow_provider_dpone.adapters.clickhouse.sink",
    "airflow_provider_dpone.adapters.artifacts.arrow_ipc",
    "clickhouse_connect",
)


def write_manifest(
    directory: Path,
    *,
    shape: str,
    source: Path,
    sink: str,
    table: str,
    export: str,
    load: str,
    chunk_rows: int,
) -> Path:
    """A manifest in ``directory`` (its checkpoint file beside it, so every measurement starts clean)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "manifest.yaml"
    path.write_text(
        MANIFEST_TEMPLATE.format(
            shape=shape,
            source="/" + str(source.resolve()).lstrip("/"),
            export=export,
            chunk_rows=chunk_rows,
            sink=sink,
            table=table,
            load=load,
            state="/" + str((directory / "state.sqlite").resolve()).lstrip("/"),
        ),
        encoding="utf-8",
    )
    return path


class _StageTimes:
    """A ProgressListener that keeps when each run step began (seconds since the clock started)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.marks: dict[str, float] = {}

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        self.marks["planned"] = self._clock.seconds()

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        return None

    def stage(self, name: str) -> None:
        self.marks[name] = self._clock.seconds()


def run_dpone(spec: dict[str, Any]) -> dict[str, Any]:
    for module in _PRELOAD:
        importlib.import_module(module)
    if spec.get("target") == "chdb":
        importlib.import_module("chdb")
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.manifests.loader import load_manifest

    clock = Clock()
    stages = _StageTimes(clock)
    loaded = load_manifest(spec["manifest"])
    with open_runtime(loaded, progress=stages) as runtime:
        report = runtime.run(spec["run_id"])
    closed = clock.seconds()
    import airflow_provider_dpone

    result = clock.result(
        report.rows_committed,
        dpone_source=str(Path(airflow_provider_dpone.__file__).parent),
        partitions=report.partitions_committed,
        stages={**stages.marks, "done": closed},
        finished_at=time.time(),
    )
    return result
