"""In-process wall and CPU clocks for a child's measured region."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Clock:
    wall0: float = field(default_factory=time.perf_counter)
    cpu0: float = field(default_factory=time.process_time)

    def restart(self) -> None:
        self.wall0 = time.perf_counter()
        self.cpu0 = time.process_time()

    def seconds(self) -> float:
        return time.perf_counter() - self.wall0

    def cpu_seconds(self) -> float:
        return time.process_time() - self.cpu0

    def result(self, rows: int, **extra: object) -> dict[str, object]:
        return {"rows": rows, "seconds": self.seconds(), "cpu_seconds": self.cpu_seconds(), **extra}
