"""A timeout that lands while chDB loads leaves the open as itself, never as "install the embedded extra".

chDB's extension is built with pybind11, whose module init turns any exception raised inside it (a signal
handler's, e.g. Airflow's ``AirflowTaskTimeout``) into an ImportError that keeps only its text, and a second
init in the same process fails with "type ... is already registered". The fake chDB below does the same, so
no Airflow and no real chDB are needed; /tmp/helper-184/scan.py shows it with the real one.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, ModuleType

import pytest

from airflow_provider_dpone.adapters.clickhouse import client as clickhouse_client
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import NON_RETRYABLE_CODES, DponeError, ErrorCode

#: a signal with no handler of pytest's own (pytest-timeout may hold SIGALRM)
SIGNAL = signal.SIGUSR1


class TaskTimeout(BaseException):
    """What Airflow's SIGALRM handler raises: a BaseException, not an Exception."""


class _PybindLikeChdb(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A ``chdb`` whose extension init, like pybind11's, keeps only the text of what is raised inside it."""

    def __init__(self, *, signal_during_init: bool) -> None:
        self.signal_during_init = signal_during_init
        self.registered = False  # pybind11's types, which stay registered after a cut init

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(fullname, self) if fullname == "chdb" else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._init_extension()
        except ImportError as exc:
            raise ImportError("chdb-core engine not found. Install it with: pip install chdb-core") from exc

    def _init_extension(self) -> None:
        if self.registered:
            raise ImportError('generic_type: type "query_class" is already registered!')
        self.registered = True
        try:
            if self.signal_during_init:
                signal.raise_signal(SIGNAL)  # its Python handler runs here, inside the init
        except BaseException as exc:  # pybind11: catch (const std::exception &e) -> ImportError(e.what())
            raise ImportError(f"{type(exc).__name__}: {exc}") from None
        self.registered = False  # a whole init: a real second import finds chdb in sys.modules instead


@pytest.fixture
def fake_chdb(monkeypatch: pytest.MonkeyPatch) -> Iterator[_PybindLikeChdb]:
    finder = _PybindLikeChdb(signal_during_init=True)
    real = sys.modules.pop("chdb", None)
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    monkeypatch.setattr(clickhouse_client._ChdbImport, "interrupted", False)
    try:
        yield finder
    finally:
        sys.modules.pop("chdb", None)
        if real is not None:
            sys.modules["chdb"] = real


@pytest.fixture
def timeout_handler() -> Iterator[list[TaskTimeout]]:
    """A handler like Airflow's timeout: it raises a new TaskTimeout; the test gets each object it raised."""
    raised: list[TaskTimeout] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        raised.append(TaskTimeout("Process timed out"))
        raise raised[-1]

    previous = signal.signal(SIGNAL, handler)
    try:
        yield raised
    finally:
        signal.signal(SIGNAL, previous)


def _endpoint(tmp_path: Path) -> EndpointDescriptor:
    return EndpointDescriptor(
        name="warehouse", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(tmp_path)
    )


def test_a_timeout_during_the_chdb_import_leaves_the_open_as_the_timeout_object_itself(
    fake_chdb: _PybindLikeChdb, timeout_handler: list[TaskTimeout], tmp_path: Path
) -> None:
    with pytest.raises(TaskTimeout) as timed_out:
        clickhouse_client._open_chdb(_endpoint(tmp_path))
    assert timeout_handler and timed_out.value is timeout_handler[0]
    assert not fake_chdb.registered, "the timeout was held until chDB had loaded whole"


def test_the_held_signal_handlers_are_the_process_own_again_after_the_import(
    fake_chdb: _PybindLikeChdb, timeout_handler: list[TaskTimeout], tmp_path: Path
) -> None:
    handler = signal.getsignal(SIGNAL)
    with pytest.raises(TaskTimeout):
        clickhouse_client._open_chdb(_endpoint(tmp_path))
    assert signal.getsignal(SIGNAL) is handler


def test_an_import_cut_earlier_in_the_process_is_a_retryable_stop_not_a_missing_extra(
    fake_chdb: _PybindLikeChdb, timeout_handler: list[TaskTimeout], tmp_path: Path
) -> None:
    with pytest.raises(ImportError):  # another importer (a DAG file's `import chdb`), cut while it loaded
        importlib.import_module("chdb")
    with pytest.raises(DponeError) as stopped:
        clickhouse_client._open_chdb(_endpoint(tmp_path))
    error = stopped.value
    assert error.code is ErrorCode.TARGET_UNREACHABLE
    assert error.code not in NON_RETRYABLE_CODES
    assert "interrupted earlier in this process" in error.safe_message
    assert "pip install" not in error.safe_message
    assert isinstance(error.__cause__, ImportError)


def test_an_interrupt_raised_inside_the_import_leaves_as_itself_and_the_next_open_is_retryable(
    fake_chdb: _PybindLikeChdb, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    interrupt = KeyboardInterrupt()

    def cut(module: ModuleType) -> None:
        fake_chdb.registered = True
        raise interrupt

    monkeypatch.setattr(fake_chdb, "exec_module", cut)
    with pytest.raises(KeyboardInterrupt) as first:
        clickhouse_client._open_chdb(_endpoint(tmp_path))
    assert first.value is interrupt

    def refuse(module: ModuleType) -> None:  # a build whose second init says nothing of the first one
        raise ImportError("chdb-core engine not found. Install it with: pip install chdb-core")

    monkeypatch.setattr(fake_chdb, "exec_module", refuse)
    with pytest.raises(DponeError) as second:
        clickhouse_client._open_chdb(_endpoint(tmp_path))
    assert second.value.code is ErrorCode.TARGET_UNREACHABLE


def test_a_chdb_that_is_not_installed_is_still_the_missing_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(clickhouse_client._ChdbImport, "interrupted", False)
    monkeypatch.setitem(sys.modules, "chdb", None)  # what `import chdb` sees when it is not installed
    with pytest.raises(DponeError) as missing:
        clickhouse_client._open_chdb(_endpoint(tmp_path))
    assert missing.value.code is ErrorCode.EMBEDDED_EXTRA_MISSING
