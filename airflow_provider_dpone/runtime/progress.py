"""Progress callbacks so the CLI can draw per-partition progress without the runtime printing."""

from __future__ import annotations

from typing import Protocol


class ProgressListener(Protocol):
    def plan_ready(self, to_run: int, to_skip: int) -> None: ...

    def partition_moved(self, label: str, rows: int, seconds: float) -> None: ...

    def stage(self, name: str) -> None:
        """A run step began: ``extract``, ``stage``, ``arm``, ``target``, ``commit``."""


class SilentProgress:
    def plan_ready(self, to_run: int, to_skip: int) -> None:
        return None

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        return None

    def stage(self, name: str) -> None:
        return None
