"""Reading a chaos trial's checkpoint database from outside the run, shared by the chaos tests."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path


def guard_phases(state: Path) -> set[str]:
    """Guard phases currently recorded in a trial's checkpoint database (read-only, tolerant of absence)."""
    if not state.exists():
        return set()
    try:
        conn = sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=0.2)
        try:
            rows = conn.execute("SELECT payload_text FROM dpone_partition_checkpoints").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return set()
    phases = set()
    for (payload,) in rows:
        guard = json.loads(payload)["diagnostics"].get("target_commit_guard")
        if guard:
            phases.add(guard["phase"])
    return phases
