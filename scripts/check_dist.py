"""Build the sdist and the wheel, `twine check --strict` them, and check what an index user gets.

Part of the test command (scripts/test.sh). Fails (exit 1) when:
- the build or `twine check` fails (the long description must render);
- the sdist lacks LICENSE, CHANGELOG.md, README.md, the tests, the docs or the example DAGs;
- the wheel lacks py.typed or the license file, or ships the tests;
- the metadata lacks a required classifier or a project URL;
- the long description has a link that only works inside the repository (relative, or to a local path).

Usage: python scripts/check_dist.py [--keep DIR]   (DIR keeps the built files; default a temporary folder)
"""

from __future__ import annotations

import argparse
import email.parser
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDIST_MEMBERS = (
    "LICENSE",
    "README.md",
    "CHANGELOG.md",
    "pyproject.toml",
    "tests/conftest.py",
    "tests/unit/__init__.py",
    "docs/guide/compatibility.md",
    "docs/runbook/manual-reconciliation.md",
    "dags_examples/orders_incremental_dag.py",
    "airflow_provider_dpone/py.typed",
)
CLASSIFIERS = (
    "Framework :: Apache Airflow",
    "Framework :: Apache Airflow :: Provider",
    "Programming Language :: Python :: 3.11",
    "Typing :: Typed",
)
URL_LABELS = ("Homepage", "Source", "Documentation", "Changelog")
#: Not copied into the build tree: environments, caches, earlier build output, demo folders.
TREE_EXCLUDES = (
    ".git",
    ".venv",
    "*.egg-info",
    "build",
    "dist",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "dpone-demo",
    "results",
)
#: Markdown links and images: ``[text](target)`` / ``![alt](target)``
LINK = re.compile(r"\]\(([^)\s]+)")


def problems_in(dist: Path) -> list[str]:
    sdists = sorted(dist.glob("*.tar.gz"))
    wheels = sorted(dist.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        return [f"expected one sdist and one wheel in {dist}, found {len(sdists)} and {len(wheels)}"]
    found: list[str] = []
    with tarfile.open(sdists[0]) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    found += [f"sdist lacks {member}" for member in SDIST_MEMBERS if member not in names]
    with zipfile.ZipFile(wheels[0]) as whl:
        wheel_names = whl.namelist()
        metadata_name = next(n for n in wheel_names if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(whl.read(metadata_name).decode("utf-8"))
    if "airflow_provider_dpone/py.typed" not in wheel_names:
        found.append("wheel lacks airflow_provider_dpone/py.typed")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel_names):
        found.append("wheel lacks its license file")
    if any(n.startswith("tests/") for n in wheel_names):
        found.append("wheel ships the tests as a top-level package")
    classifiers = set(metadata.get_all("Classifier") or [])
    found += [f"metadata lacks classifier {c!r}" for c in CLASSIFIERS if c not in classifiers]
    urls = {str(u).split(",", 1)[0].strip() for u in metadata.get_all("Project-URL") or []}
    found += [f"metadata lacks project URL {label!r}" for label in URL_LABELS if label not in urls]
    if metadata.get("License-Expression") != "Apache-2.0":
        found.append("metadata License-Expression is not Apache-2.0")
    description = metadata.get_payload()
    if not isinstance(description, str) or not description.strip():
        found.append("metadata has no long description")
    else:
        for target in LINK.findall(description):
            if not target.startswith(("https://", "http://", "#", "mailto:")):
                found.append(f"long description links to {target!r}, which only works inside the repository")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build into this folder and keep it")
    args = parser.parse_args()
    dist = args.keep or Path(tempfile.mkdtemp(prefix="dpone-dist-"))
    dist.mkdir(parents=True, exist_ok=True)
    tree: Path | None = None
    try:
        # Build from a clean copy: setuptools would reuse an in-tree *.egg-info/SOURCES.txt (left by the
        # editable install) as the sdist's file list, hiding a MANIFEST.in that lost a folder.
        tree = Path(tempfile.mkdtemp(prefix="dpone-dist-tree-")) / "src"
        shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(*TREE_EXCLUDES), symlinks=True)
        build = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(dist), str(tree)]
        done = subprocess.run(build, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
            print("[dist] FAILED: python -m build", file=sys.stderr)
            return 1
        files = [str(p) for p in sorted(dist.iterdir())]
        twine = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files], check=False)
        if twine.returncode != 0:
            print("[dist] FAILED: twine check --strict", file=sys.stderr)
            return 1
        found = problems_in(dist)
        for problem in found:
            print(f"[dist] {problem}", file=sys.stderr)
        if found:
            return 1
        print(f"[dist] OK: {', '.join(Path(f).name for f in files)}")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(dist, ignore_errors=True)
        if tree is not None:
            shutil.rmtree(tree.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
