"""Arrow buffers from the C library's allocator during a run, unless the user chose Arrow's pool.

pyarrow allocates from mimalloc by default. A run's reading threads allocate the chunks that the loading
thread converts, inserts and frees, and mimalloc keeps pages freed by another thread with the heap of the
thread that allocated them: the peak grew with the table. Measured with ``benchmarks/run.py`` (peak RSS of a
run in a fresh process, 1M -> 5M demo rows): ``lazy_plan + direct`` into chDB 494 -> 595 MB with mimalloc,
461-471 -> 521-522 MB with the system allocator; over HTTP 227 -> 250 MB against 195 -> 211 MB.

Arrow reads ``ARROW_DEFAULT_MEMORY_POOL`` itself when it creates its default pool; when that variable names
a pool (``mimalloc``, ``jemalloc``, ``system``), it is left alone. Buffers allocated before the switch
still go back to the pool they came from (every buffer keeps its pool), so switching at any time is safe.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: Arrow's own setting; a user who sets it keeps the pool it names.
POOL_SETTING = "ARROW_DEFAULT_MEMORY_POOL"


def use_system_allocator(environ: Mapping[str, str] | None = None) -> bool:
    """Make the C library's allocator Arrow's default pool; ``False`` when ``POOL_SETTING`` chose one."""
    env = os.environ if environ is None else environ
    if env.get(POOL_SETTING, "").strip():
        return False
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return True
