"""Injected time, so a terminal checkpoint batch can share one UTC timestamp, durations come from outside
the runtime, and tests can fix both."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Timezone-aware UTC now."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: for durations only (the run report's seconds)."""
