"""Progress callbacks so the CLI can draw per-partition progress without the runtime printing."""

from __future__ import annotations

import logging
from typing import Protocol

_log = logging.getLogger(__name__)


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


class BestEffortProgress:
    """A listener whose failures never reach the run: it is called inside the guarded target call, where
    a display that raised (stderr piped into ``head`` that has exited: ``BrokenPipeError``) ended the call
    with the target half-written and blocked the route. The first failure is logged (its type only) and
    the display is off for the rest of the run."""

    def __init__(self, inner: ProgressListener) -> None:
        self._inner: ProgressListener | None = inner

    def _call(self, name: str, *args: object) -> None:
        inner = self._inner
        if inner is None:
            return
        try:
            getattr(inner, name)(*args)
        except Exception as exc:  # a display failure is never the run's
            self._inner = None
            _log.warning("the progress display failed (%s); the run goes on without it", type(exc).__name__)

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        self._call("plan_ready", to_run, to_skip)

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        self._call("partition_moved", label, rows, seconds)

    def stage(self, name: str) -> None:
        self._call("stage", name)
