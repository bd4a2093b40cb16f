"""The cyclic garbage collector paused over the guard scan and planning of a run, and over the checkpoint
store's parsing of many stored rows (the one pause both use).

A route with a long history has tens of thousands of latest checkpoints; the scan turns each into a
model and planning builds a decision per partition. None of it is garbage, yet every ~700 allocations
the collector runs and its full passes walk everything built so far: with 100k history rows the
collector took about a third of planning's CPU. Reference counting frees as usual while it is paused;
it is resumed afterwards (only if it was running), whatever happens inside.

Resuming alone is not enough: everything allocated during the pause is still in the youngest
generation, so the first allocation afterwards starts a collection that walks all of it (0.2 s after a
50,000-checkpoint scan). Before resuming, the survivors are moved to the oldest generation instead
(``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no walk). Nothing leaks: a cycle among them is
still found by the next full collection. Skipped when something else froze objects (e.g. a forking
server protecting its copy-on-write pages), which ``unfreeze`` would undo.
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
            promote_young_objects()
            gc.enable()


def promote_young_objects() -> None:
    """Move every tracked object to the oldest generation without walking them (see the module doc)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
