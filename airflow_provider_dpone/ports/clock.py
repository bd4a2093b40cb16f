"""Injected time, so a terminal checkpoint batch can share one UTC timestamp and tests can fix it."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Timezone-aware UTC now."""
