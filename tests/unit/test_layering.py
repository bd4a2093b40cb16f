"""The import rules of pyproject.toml hold, and lint-imports really catches a vendor SDK in runtime/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_provider_dpone"


def _lint_imports() -> str:
    beside = Path(sys.executable).parent / "lint-imports"
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    if found is None:
        pytest.fail("lint-imports is not installed (pip install -e '.[test]')", pytrace=False)
    return found


def _run_lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        # First on the path, so the copy shadows the editable install of the real package.
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [_lint_imports(), "--no-cache", "--no-logo", "pyproject.toml"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_import_contracts_of_pyproject_are_kept() -> None:
    result = _run_lint_imports(REPO_ROOT)
    assert result.returncode == 0, f"lint-imports failed:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout, result.stdout


def test_lint_imports_fails_when_runtime_imports_clickhouse_connect(tmp_path: Path) -> None:
    src = tmp_path / "src"
    copy = src / PACKAGE
    shutil.copytree(REPO_ROOT / PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")

    clean = _run_lint_imports(tmp_path, pythonpath=src)
    assert clean.returncode == 0, f"the unmodified copy should pass:\n{clean.stdout}\n{clean.stderr}"

    (copy / "runtime" / "_layering_probe.py").write_text(
        '"""Deliberate violation for the layering test."""\n\nimport clickhouse_connect  # noqa: F401\n'
    )
    broken = _run_lint_imports(tmp_path, pythonpath=src)
    output = broken.stdout + broken.stderr
    assert broken.returncode != 0, f"lint-imports accepted runtime importing clickhouse_connect:\n{output}"
    assert "BROKEN" in output, f"expected a broken contract, not a configuration error:\n{output}"
    assert f"{PACKAGE}.runtime._layering_probe -> clickhouse_connect" in output, output
