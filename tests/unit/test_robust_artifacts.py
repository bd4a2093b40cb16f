"""File artifacts (issue 11, point 6): a full disk is ``artifact_invalid``; a killed run's files are removed."""

from __future__ import annotations

import builtins
import errno
import io
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.artifacts import arrow_ipc
from airflow_provider_dpone.adapters.artifacts.arrow_ipc import (
    LOCK_NAME,
    RUN_DIR_PREFIX,
    ArrowIpcArtifactStore,
)
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

PARTITION = "sha256:" + "5e" * 32
SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="customer", clickhouse_type="String"),
    )
)
SECRET_ROW_VALUE = "customer-value-7781"


def chunks(n: int = 3, rows: int = 5_000) -> Iterator[ColumnChunk]:
    for c in range(n):
        ids = list(range(c * rows, (c + 1) * rows))
        yield ColumnChunk(
            partition_id=PARTITION,
            names=SCHEMA.names,
            columns=(ids, [f"{SECRET_ROW_VALUE} {i}" for i in ids]),
            row_count=rows,
        )


class FullDisk(io.RawIOBase):
    """A raw file whose every write fails as a full file system does (``ENOSPC``)."""

    def writable(self) -> bool:
        return True

    def write(self, _data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "not a real file")


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """``open(..., "wb")`` in the artifact module returns a buffered writer over :class:`FullDisk`."""
    real_open = builtins.open

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode:
            real_open(file, mode, *args, **kwargs).close()  # the temporary file exists, as on a real disk
            return io.BufferedWriter(FullDisk())
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(arrow_ipc, "open", fake_open, raising=False)


def test_a_full_disk_while_writing_an_artifact_is_artifact_invalid_and_leaves_no_file(
    tmp_path: Path, full_disk: None
) -> None:
    store = ArrowIpcArtifactStore(tmp_path / f"{RUN_DIR_PREFIX}run")
    with pytest.raises(DponeError) as failed:
        store.write(PARTITION, SCHEMA, chunks())
    assert failed.value.code is ErrorCode.ARTIFACT_INVALID
    assert failed.value.details["error_class"] == "OSError"
    assert isinstance(failed.value.__cause__, OSError)
    assert failed.value.__cause__.errno == errno.ENOSPC
    text = str(failed.value) + repr(failed.value.details)
    assert str(tmp_path) not in text and SECRET_ROW_VALUE not in text and "No space" not in text
    assert [p.name for p in (tmp_path / f"{RUN_DIR_PREFIX}run").iterdir()] == [LOCK_NAME]


def test_a_full_disk_on_a_small_partition_fails_at_close_as_artifact_invalid(
    tmp_path: Path, full_disk: None
) -> None:
    """Few rows stay in the write buffer: the failure surfaces only when the file is flushed or closed."""
    store = ArrowIpcArtifactStore(tmp_path / "artifacts")
    with pytest.raises(DponeError) as failed:
        store.write(PARTITION, SCHEMA, chunks(n=1, rows=1))
    assert failed.value.code is ErrorCode.ARTIFACT_INVALID


# -- a killed run's artifacts ----------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time
    from airflow_provider_dpone.adapters.artifacts.arrow_ipc import ArrowIpcArtifactStore
    from airflow_provider_dpone.contracts.chunk import ColumnChunk
    from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
    schema = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),))
    store = ArrowIpcArtifactStore(sys.argv[1])
    chunk = ColumnChunk(partition_id="p", names=("id",), columns=([1, 2, 3],), row_count=3)
    store.write("p", schema, [chunk])
    print("written", flush=True)
    time.sleep(120)
    """
)


def start_writer(directory: Path) -> subprocess.Popen[str]:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory)], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
    return writer


def arrow_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob(f"*{arrow_ipc.SUFFIX}"))


def test_a_new_run_removes_the_artifacts_of_a_sigkilled_run_and_keeps_a_live_run_s(tmp_path: Path) -> None:
    killed_dir, live_dir = tmp_path / f"{RUN_DIR_PREFIX}killed", tmp_path / f"{RUN_DIR_PREFIX}live"
    killed, live = start_writer(killed_dir), start_writer(live_dir)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert arrow_files(killed_dir)  # the SIGKILLed run left its Arrow file behind

        ArrowIpcArtifactStore(tmp_path / f"{RUN_DIR_PREFIX}next")

        assert not killed_dir.exists()
        assert arrow_files(live_dir)  # its owner is alive: never touched
    finally:
        for proc in (killed, live):
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()


def test_a_closed_store_s_directory_is_a_dead_run_s_and_a_held_one_is_not(tmp_path: Path) -> None:
    first = ArrowIpcArtifactStore(tmp_path / f"{RUN_DIR_PREFIX}a")
    first.write("p", SCHEMA, chunks(n=1, rows=3))
    ArrowIpcArtifactStore(tmp_path / f"{RUN_DIR_PREFIX}b")
    assert (tmp_path / f"{RUN_DIR_PREFIX}a").exists()  # held by ``first`` (same process, own lock)
    first.close()
    ArrowIpcArtifactStore(tmp_path / f"{RUN_DIR_PREFIX}c")
    assert not (tmp_path / f"{RUN_DIR_PREFIX}a").exists()


def test_directories_without_a_lock_file_or_outside_the_run_prefix_are_left_alone(tmp_path: Path) -> None:
    foreign = tmp_path / f"{RUN_DIR_PREFIX}no-lock"
    foreign.mkdir()
    (foreign / "keep.arrows").write_bytes(b"x")
    other = ArrowIpcArtifactStore(tmp_path / "elsewhere")
    other.close()
    assert not (tmp_path / "elsewhere" / LOCK_NAME).exists()  # only run directories carry a lock
    ArrowIpcArtifactStore(tmp_path / "custom-dir")  # not a run directory: sweeps nothing
    assert (tmp_path / "elsewhere").exists()
    ArrowIpcArtifactStore(tmp_path / f"{RUN_DIR_PREFIX}d")
    assert (foreign / "keep.arrows").exists()
    assert (tmp_path / "elsewhere").exists()
