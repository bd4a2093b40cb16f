"""Every third-party module the package imports is installed by its declared dependencies.

Red before: ``adapters/clickhouse/native_body.py`` imports numpy, which only the ``embedded`` extra brought
(chdb -> pandas -> numpy); the plain install the README documents for a ClickHouse server failed every
load with ``unexpected_error`` (``ModuleNotFoundError``). Both CI lanes install the extras, so only this
reading of the imports sees it.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_provider_dpone"

#: Modules a declared dependency installs under another distribution's name, each with its reason.
THROUGH_A_DECLARED_DEPENDENCY = {
    "airflow": "apache-airflow (apache-airflow-core, task-sdk, the providers)",
    "adbc_driver_manager": "adbc-driver-sqlite",
    "pydantic_core": "pydantic",
    "rich": "apache-airflow",
    "urllib3": "clickhouse-connect",
    "openlineage": "imported only inside the optional lineage hook (operators/lineage.py)",
}
#: Module names that differ from their distribution's name.
DISTRIBUTION_OF = {"yaml": "pyyaml", "psycopg2": "psycopg2-binary", "sqlalchemy": "sqlalchemy"}


def _imported_top_level_modules() -> set[str]:
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != PACKAGE.name}


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {
        re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower()
        for requirement in project["dependencies"]
    }


def test_every_imported_module_comes_with_a_declared_dependency() -> None:
    declared = _declared()
    undeclared = {
        module
        for module in _imported_top_level_modules()
        if module not in THROUGH_A_DECLARED_DEPENDENCY
        and DISTRIBUTION_OF.get(module, module.replace("_", "-")).lower() not in declared
    }
    assert not undeclared, f"imported but not declared in [project].dependencies: {sorted(undeclared)}"
