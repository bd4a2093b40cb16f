"""The import rules of pyproject.toml hold, and lint-imports really catches a vendor SDK in runtime/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: import-linter depends on tomli there
    import tomli as tomllib

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


def _internal_modules_named_in_contracts(pyproject: Path) -> set[str]:
    config = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]
    named: set[str] = set()
    for contract in config.get("contracts", []):
        for key in ("source_modules", "forbidden_modules", "layers", "containers"):
            named.update(m for m in contract.get(key, []) if m == PACKAGE or m.startswith(PACKAGE + "."))
    return named


def test_import_contracts_of_pyproject_are_kept() -> None:
    result = _run_lint_imports(REPO_ROOT)
    assert result.returncode == 0, f"lint-imports failed:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout, result.stdout


def test_lint_imports_fails_when_runtime_imports_clickhouse_connect(tmp_path: Path) -> None:
    src = tmp_path / "src"
    copy = src / PACKAGE
    shutil.copytree(REPO_ROOT / PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (copy / "runtime").mkdir(exist_ok=True)
    (copy / "runtime" / "__init__.py").touch()
    # Layers a contract names but nobody has written yet would make lint-imports stop with a config error
    # before judging runtime/; give them empty stand-ins in the copy so this test isolates the one rule.
    for module in sorted(_internal_modules_named_in_contracts(tmp_path / "pyproject.toml")):
        parts = module.split(".")[1:]
        as_package = copy.joinpath(*parts)
        as_module = copy.joinpath(*parts[:-1], parts[-1] + ".py") if parts else copy / "__init__.py"
        if (as_package / "__init__.py").exists() or as_module.exists():
            continue
        stand_in = as_package / "__init__.py" if as_package.is_dir() else as_module
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        stand_in.write_text('"""Stand-in for a layer not written yet (layering test only)."""\n')

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
