"""A progress display that fails never ends the run: it is called inside the guarded target call.

Seen: ``dpone run m.yaml 2>&1 | head -n 2``. Once ``head`` had exited, the next progress line raised
``BrokenPipeError`` inside the target call: the run ended with the target half-written (10,000 of 50,000
rows of a day) and every partition ``target_outcome_unknown``, the route blocked for an operator.
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import ROWS, manifest_at, source_rows, target_rows


class ClosedPipeDisplay:
    """What the CLI's display does once the reader of stderr has gone: every line raises."""

    def __init__(self) -> None:
        self.calls = 0

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        self.calls += 1

    def stage(self, name: str) -> None:
        if name == "target":
            self.calls += 1
            raise BrokenPipeError(32, "Broken pipe")

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        self.calls += 1
        raise BrokenPipeError(32, "Broken pipe")


def test_a_display_that_fails_inside_the_target_call_never_blocks_the_route(tmp_path: Path) -> None:
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=4)
    manifest = manifest_at(tmp_path, state="sqlite:///state.sqlite")
    display = ClosedPipeDisplay()

    with open_runtime(load_manifest(manifest), progress=display) as runtime:
        report = runtime.run("r1")

    assert report.rows_committed == ROWS
    assert display.calls == 2  # the plan, then the first failure: the display is off after it
    assert target_rows(tmp_path) == source_rows(tmp_path)
    with open_runtime(load_manifest(manifest)) as runtime:
        assert runtime.run("r2").rows_committed == 0  # nothing blocked, nothing left to move
