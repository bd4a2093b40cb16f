"""Cyclic garbage collection paused while a scan turns many stored rows into checkpoint models.

Parsing tens of thousands of payloads allocates millions of container objects, none of them garbage:
the collector's young-generation passes run every ~700 allocations and each full pass walks everything
parsed so far, so the route scan of a long history spent more than half its time collecting (100k
history rows: 1.4-1.6 s). Reference counting still frees everything as usual; the collector is resumed
afterwards (only if it was running), whatever happens inside.
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
