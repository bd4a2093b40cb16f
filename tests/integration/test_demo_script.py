"""scripts/demo.sh: setup's banners never reach the demo's output, and the demo runs in the caller's folder."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

BANNER_SETUP = """\
#!/usr/bin/env bash
echo '[setup] creating venv'
echo '  !!' >&2
echo '        ********************************************************************************' >&2
echo '        Please be careful with folders in your working directory with the same' >&2
echo '[setup] installed in 1s'
echo '[setup] done in 1s'
exit "${FAKE_SETUP_RC:-0}"
"""
FAKE_DPONE = """\
#!/usr/bin/env bash
echo "dpone $* in $PWD"
"""


def _fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "demo.sh", root / "scripts" / "demo.sh")
    (root / "scripts" / "setup.sh").write_text(BANNER_SETUP, encoding="utf-8")
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "dpone").write_text(FAKE_DPONE, encoding="utf-8")
    (venv_bin / "dpone").chmod(0o755)
    return root


def test_setup_banner_is_kept_out_of_the_demo_output(tmp_path: Path) -> None:
    root = _fake_root(tmp_path)
    caller = tmp_path / "elsewhere"
    caller.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DPONE_VENV"}
    done = subprocess.run(
        ["bash", str(root / "scripts" / "demo.sh"), "--rows", "10"],
        cwd=caller,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    both = done.stdout + done.stderr
    assert "!!" not in both and "*****" not in both and "Please be careful" not in both
    assert "[setup] installed in 1s" in done.stdout
    assert f"dpone demo --rows 10 in {caller}" in done.stdout  # relative paths it prints hold in this shell


def test_a_failed_setup_shows_its_log(tmp_path: Path) -> None:
    root = _fake_root(tmp_path)
    env = {**{k: v for k, v in os.environ.items() if k != "DPONE_VENV"}, "FAKE_SETUP_RC": "1"}
    done = subprocess.run(
        ["bash", str(root / "scripts" / "demo.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Please be careful" in done.stderr
    assert "[demo] setup failed" in done.stderr
    assert "dpone demo" not in done.stdout
