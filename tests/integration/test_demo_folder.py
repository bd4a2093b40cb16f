"""`dpone demo` cannot corrupt itself: a non-empty folder is refused unless --force recreates all of it.

Each run is a real `dpone` process (chDB holds one path per process), started by the virtualenv's path so
the follow-up lines it prints are run exactly as printed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

DPONE = Path(sys.executable).with_name("dpone")


def dpone(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DPONE), *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env, check=False
    )


def source_rows(base: Path) -> list[tuple[int, str, float]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        return [
            (int(i), str(d), float(a)) for i, d, a in db.execute("SELECT id, order_date, amount FROM orders")
        ]


def target_rows(base: Path) -> list[tuple[int, str, float]]:
    """demo.orders as chDB holds it, read in a child process so this one never opens a chDB path."""
    code = (
        "import sys, clickhouse_connect\n"
        "c = clickhouse_connect.get_client(interface='chdb', path=sys.argv[1])\n"
        "for i, d, a in c.query('SELECT id, toString(order_date), toFloat64(amount) FROM demo.orders').result_rows:\n"
        "    print(i, d, a)\n"
        "c.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(base / "clickhouse")], capture_output=True, text=True, check=True
    ).stdout
    return [(int(i), d, float(a)) for i, d, a in (line.split() for line in out.splitlines())]


def committed_rows(base: Path) -> int:
    with sqlite3.connect(base / "state.sqlite") as db:
        payloads = [row[0] for row in db.execute("SELECT payload FROM dpone_partition_checkpoints")]
    import json

    latest: dict[str, dict[str, object]] = {}
    for text in payloads:
        checkpoint = json.loads(text)
        latest[str(checkpoint["partition_id"])] = checkpoint
    return sum(int(str(c["rows"])) for c in latest.values() if c["status"] == "COMMITTED")


@pytest.fixture(scope="module")
def demo_300(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("demo")
    done = dpone("demo", "--dir", "d", "--rows", "300", cwd=work)
    assert done.returncode == 0, done.stderr
    return work


def test_existing_demo_is_refused_and_left_as_it_was(demo_300: Path) -> None:
    base = demo_300 / "d"
    before = source_rows(base)
    again = dpone("demo", "--dir", "d", "--rows", "100", cwd=demo_300)
    assert again.returncode == 2
    assert "error: usage_error: demo folder d is not empty" in again.stderr
    assert "--force" in again.stderr
    assert again.stdout == ""
    assert source_rows(base) == before  # the source was not rewritten under the target
    assert len(before) == 300
    assert sorted(target_rows(base)) == sorted(before)


def test_a_demo_folder_that_cannot_be_written_is_a_usage_error_with_one_json_object(tmp_path: Path) -> None:
    """Red before: an ``OSError`` escaped as ``unexpected_error`` (exit 1) and ``--json`` printed nothing."""
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")

    result = dpone("demo", "--dir", "a-file/demo", "--json", cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    error = json.loads(result.stdout)
    assert error["error"] == "usage_error"
    assert "cannot write the demo folder" in error["message"]


def test_follow_up_lines_run_as_printed(demo_300: Path, tmp_path: Path) -> None:
    """The venv's dpone is not on PATH here: the printed lines name it by path and still work."""
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    fresh = dpone("demo", "--dir", "f", "--rows", "50", cwd=tmp_path, env=env)
    assert fresh.returncode == 0, fresh.stderr
    lines = {
        line.split(":", 1)[0]: line.split(":", 1)[1] for line in fresh.stdout.splitlines() if ":  " in line
    }
    again_cmd = lines["again"].split("    (")[0].strip()
    state_cmd = lines["state"].strip()
    assert again_cmd.startswith(str(DPONE))
    again = subprocess.run(
        again_cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout
    state = subprocess.run(
        state_cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert state.returncode == 0, state.stderr
    assert "committed" in state.stdout.replace("COMMITTED", "committed")
    assert "no checkpoints yet" not in state.stdout


def test_force_recreates_all_four_parts(tmp_path: Path) -> None:
    first = dpone("demo", "--dir", "d", "--rows", "400", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    base = tmp_path / "d"
    manifest = base / "manifest.yaml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace("load: direct", "load: staged"), "utf-8")
    forced = dpone("demo", "--dir", "d", "--rows", "120", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "nothing to do" not in forced.stdout
    source = source_rows(base)
    assert len(source) == 120
    assert sorted(target_rows(base)) == sorted(source)  # the old 400-row target is gone, values match
    assert committed_rows(base) == 120  # checkpoints are new too
    assert "kind: native_transfer" in (base / "manifest.yaml").read_text(encoding="utf-8")


def test_force_never_deletes_files_that_are_not_the_demos(tmp_path: Path) -> None:
    base = tmp_path / "mine"
    base.mkdir()
    (base / "notes.txt").write_text("keep me\n", encoding="utf-8")
    (base / "manifest.yaml").write_text("kind: x\n", encoding="utf-8")
    forced = dpone("demo", "--dir", "mine", "--rows", "10", "--force", cwd=tmp_path)
    assert forced.returncode == 2
    assert "is not a demo's (first entry the demo did not write: notes.txt)" in forced.stderr
    assert (base / "notes.txt").read_text(encoding="utf-8") == "keep me\n"
    assert (base / "manifest.yaml").read_text(encoding="utf-8") == "kind: x\n"


def test_an_empty_existing_folder_is_used(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = dpone("demo", "--dir", "empty", "--rows", "30", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"rows_committed": 30' in done.stdout


@pytest.mark.parametrize("manifest", ["kind: native_transfer\nname: prod\n", None])
def test_force_never_deletes_a_real_routes_checkpoints_under_the_demos_names(
    tmp_path: Path, manifest: str | None
) -> None:
    """``state.sqlite`` and ``manifest.yaml`` are names a real route uses too: without the demo's own
    manifest beside them, ``--force`` refuses and the folder keeps every byte."""
    base = tmp_path / "route"
    base.mkdir()
    if manifest is not None:
        (base / "manifest.yaml").write_text(manifest, encoding="utf-8")
    with sqlite3.connect(base / "state.sqlite") as db:
        db.execute("CREATE TABLE dpone_partition_checkpoints (id INTEGER PRIMARY KEY, payload TEXT)")
        db.execute("INSERT INTO dpone_partition_checkpoints (payload) VALUES ('{}')")
    before = {p.name: p.read_bytes() for p in base.iterdir()}
    for args in ((), ("--force",)):
        refused = dpone("demo", "--dir", "route", "--rows", "10", *args, cwd=tmp_path)
        assert refused.returncode == 2
        assert "is not a demo's" in refused.stderr and "start over" not in refused.stderr
        assert {p.name: p.read_bytes() for p in base.iterdir()} == before
