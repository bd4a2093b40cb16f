"""The cyclic garbage collector paused over the guard scan and planning of a run, and over the checkpoint
store's parsing of many stored rows (the one pause both use).

A route with a long history has tens of thousands of latest checkpoints; the scan turns each into a
model and planning builds a decision per partition. None of it is garbage, yet every ~700 allocations
the collector runs and its full passes walk everything built so far: with 100k history rows the
collector took about a third of planning's CPU. Reference counting frees as usual while it is paused;
it is resumed afterwards (only if it was running), whatever happens inside.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause ``gc`` for the block; leave it as it was (a caller that disabled it keeps it disabled)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
