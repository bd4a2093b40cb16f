"""Progress of a run on stderr: partitions done/total, rows, rate and ETA.

On a terminal a live bar drawn by ``rich`` (installed with Airflow; when it is missing, plain lines);
when stderr is not a terminal, one plain line per moved partition, so logs stay readable; with ``--json``
nothing at all. stdout is never written: it holds the report.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from airflow_provider_dpone.runtime.progress import ProgressListener

#: Steps worth a line of their own (the others are quick, or shown by the partition lines).
_NOTED_STAGES = {"arm": "arm: writing checkpoints", "commit": "commit: writing checkpoints"}


class _Tally:
    """Partitions done/total, rows and elapsed time: what both displays print."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.rows = 0
        self.started = time.monotonic()

    def planned(self, to_run: int) -> None:
        self.total, self.done, self.rows, self.started = to_run, 0, 0, time.monotonic()

    def moved(self, rows: int) -> None:
        self.done += 1
        self.rows += rows

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.rows / elapsed if elapsed > 0 else 0.0

    def eta_seconds(self) -> float | None:
        """Time left at the pace of the partitions done so far; None before the first one."""
        if not self.done or self.done >= self.total:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.done * (self.total - self.done)


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class PlainProgress:
    """One line per moved partition (for logs and pipes): ``[done/total] label rows rate total eta``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._tally = _Tally()

    def _line(self, text: str) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        self._tally.planned(to_run)
        skipped = f", skipping {to_skip} already committed" if to_skip else ""
        self._line(f"plan: {to_run} partition(s) to move{skipped}")

    def stage(self, name: str) -> None:
        if name in _NOTED_STAGES:
            self._line(_NOTED_STAGES[name])

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        tally = self._tally
        tally.moved(rows)
        rate = rows / seconds if seconds > 0 else float(rows)
        width = len(str(tally.total))
        self._line(
            f"  [{tally.done:>{width}}/{tally.total}] {label:<28} {rows:>10,} rows {rate:>12,.0f} rows/s"
            f"  total {tally.rows:,} rows  eta {format_eta(tally.eta_seconds())}"
        )

    def close(self) -> None:
        return None


class RichProgress:
    """A live bar on a terminal: partitions done/total, rows, rows/s and the time left."""

    def __init__(self, console: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._tally = _Tally()
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("partitions"),
            TextColumn("{task.fields[rows]:>12,} rows  {task.fields[rate]:>10,.0f} rows/s"),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task: Any = None

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        self._tally.planned(to_run)
        skipped = f", skipping {to_skip} already committed" if to_skip else ""
        self._progress.console.print(f"plan: {to_run} partition(s) to move{skipped}", highlight=False)
        if to_run and self._task is None:
            self._progress.start()
            self._task = self._progress.add_task("moving", total=to_run, rows=0, rate=0.0)

    def stage(self, name: str) -> None:
        if name in _NOTED_STAGES:
            self._progress.console.print(_NOTED_STAGES[name], highlight=False)

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        self._tally.moved(rows)
        if self._task is None:
            return
        self._progress.update(
            self._task,
            advance=1,
            description=f"moving {label}",
            rows=self._tally.rows,
            rate=self._tally.rate(),
        )
        if self._tally.done >= self._tally.total:
            self.close()

    def close(self) -> None:
        """Stop the live display (also when the run fails), leaving its last state on the terminal."""
        if self._task is not None:
            self._progress.stop()
            self._task = None


def _rich_console(stream: TextIO) -> Any | None:
    try:
        from rich.console import Console
    except ImportError:  # rich comes with Airflow; the CLI also runs where Airflow is not installed
        return None
    return Console(file=stream)


def make_progress(as_json: bool, stream: TextIO | None = None) -> PlainProgress | RichProgress | None:
    """Nothing with ``--json``; a live bar on a terminal (when rich is installed); else plain lines."""
    if as_json:
        return None
    out = stream or sys.stderr
    if out.isatty():
        console = _rich_console(out)
        if console is not None:
            return RichProgress(console)
    return PlainProgress(out)


@contextmanager
def progress_for(as_json: bool, stream: TextIO | None = None) -> Iterator[ProgressListener | None]:
    """:func:`make_progress` for the length of one run; a live bar is always stopped at the end."""
    display = make_progress(as_json, stream)
    try:
        yield display
    finally:
        if display is not None:
            display.close()


#: The name earlier versions used for the terminal display.
TerminalProgress = PlainProgress
