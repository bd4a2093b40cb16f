"""The real clock. Tests inject their own :class:`~airflow_provider_dpone.ports.clock.Clock`."""

from __future__ import annotations

from datetime import datetime, timezone


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)
