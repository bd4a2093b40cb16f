"""One measurement = one fresh child process; the parent keeps its wall time and its kernel rusage.

The child (``child.py``) prints one JSON line: what it moved and its own in-process timings (after its
imports). The parent adds the end-to-end wall time (spawn to exit) and the child's CPU time and peak RSS
from ``os.wait4`` — measured by the kernel, so they cover everything the child did, imports included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHILD = Path(__file__).resolve().parent / "child.py"


class ChildFailed(RuntimeError):
    pass


def measure(spec: dict[str, Any], env: dict[str, str], timeout_s: float = 3600.0) -> dict[str, Any]:
    """Run ``child.py`` with ``spec``; returns the child's JSON plus ``wall_s``, ``cpu_s``, ``max_rss_mb``."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(spec)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(CHILD.parent),
    )
    deadline = started + timeout_s
    assert proc.stdout is not None and proc.stderr is not None
    # Small outputs: read both to EOF (the child writes little), then reap with wait4 for the rusage.
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if time.perf_counter() > deadline:
        raise ChildFailed(f"{spec.get('kind')} took longer than {timeout_s:.0f} s")
    lines = [line for line in out.decode("utf-8", "replace").splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = err.decode("utf-8", "replace").strip().splitlines()[-12:]
        raise ChildFailed(
            f"{spec.get('kind')} failed (exit {proc.returncode}):\n" + "\n".join(f"    {t}" for t in tail)
        )
    result: dict[str, Any] = json.loads(lines[-1])
    own_peak = result.pop("peak_rss_mb", None)
    result.update(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        # The child's own VmHWM; ru_maxrss (kilobytes) includes the parent's RSS at fork time.
        max_rss_mb=own_peak if own_peak is not None else usage.ru_maxrss / 1024.0,
        ru_maxrss_mb=usage.ru_maxrss / 1024.0,
    )
    return result
