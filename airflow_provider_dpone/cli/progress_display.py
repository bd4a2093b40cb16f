"""Per-partition progress on a terminal (stderr), silent when output is for scripts."""

from __future__ import annotations

import sys
from typing import TextIO


class TerminalProgress:
    """Implements the runtime's ProgressListener with one line per moved partition."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        skipped = f", skipping {to_skip} already committed" if to_skip else ""
        self._stream.write(f"plan: {to_run} partition(s) to move{skipped}\n")
        self._stream.flush()

    def stage(self, name: str) -> None:
        if name in ("arm", "commit"):
            self._stream.write(f"{name}: writing checkpoints\n")
            self._stream.flush()

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        rate = rows / seconds if seconds > 0 else float(rows)
        self._stream.write(f"  {label:<28} {rows:>10,} rows  {rate:>12,.0f} rows/s\n")
        self._stream.flush()
