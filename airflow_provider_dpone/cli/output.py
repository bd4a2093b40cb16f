"""What every ``dpone`` command prints and how it exits.

Exit codes (ARCHITECTURE.md section 5): 0 success; 1 the run failed; 2 usage or invalid manifest;
3 the route is blocked (manual reconciliation required, or an invalid guard); 4 the route is busy. A failure prints one line
``error: <code>: <safe message>`` (then indented hints) to stderr, or with ``--json`` one JSON object to
stdout. An unexpected exception prints a generic line only — its message may hold SQL, values or
credentials — and its traceback only with ``--debug`` or ``DPONE_DEBUG=1``.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import sys
import traceback
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from airflow_provider_dpone.contracts.errors import (
    EXIT_FAILED,
    DponeError,
    ErrorCode,
    spec_of,
)
from airflow_provider_dpone.contracts.report import NOTICE_LOGGER

#: The code printed for a failure that is not a DponeError (not an ErrorCode: it is never raised).
UNEXPECTED_CODE = "unexpected_error"
#: Where ``dpone --debug`` is remembered on the root click context.
DEBUG_META_KEY = "dpone.debug"
#: ``--debug`` of the invocation in progress, for failures reported after click's context is gone
#: (an exception that escaped a command reaches the console-script entry point without a context).
_debug_requested = False


#: Vendor loggers that would print their own lines on stderr (clickhouse-connect's "Unexpected Http Driver
#: Exception" through logging's last-resort handler) beside the CLI's one safe ``error:`` line.
DRIVER_LOGGERS = ("clickhouse_connect", "chdb", "urllib3", "sqlalchemy", "pymssql", "psycopg2")
_driver_silencer = logging.NullHandler()


def remember_debug(debug: bool) -> None:
    """Record the root group's ``--debug`` (called for every invocation, so it never leaks into the next).

    Without ``--debug`` the drivers' own log lines are dropped (the CLI reports every failure itself, and
    their text may hold server responses); with it they reach stderr as logging's defaults print them.
    """
    global _debug_requested
    _debug_requested = debug
    silence_driver_logs(not debug)


def silence_driver_logs(silent: bool) -> None:
    """Drop (or let through again) the log records of :data:`DRIVER_LOGGERS` in this process."""
    for name in DRIVER_LOGGERS:
        logger = logging.getLogger(name)
        if silent:
            if _driver_silencer not in logger.handlers:
                logger.addHandler(_driver_silencer)
            logger.propagate = False
        elif _driver_silencer in logger.handlers:
            logger.removeHandler(_driver_silencer)
            logger.propagate = True


class _NoticeEcho(logging.Handler):
    """Prints a run's notices under the text report as the run makes them (``  note: ...``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"  {record.getMessage()}")


@contextmanager
def notices_echoed(as_json: bool) -> Iterator[None]:
    """While a run runs, each of its notices (``NOTICE_LOGGER``) is printed once on stdout, when it is made:
    a notice made before a failure is still shown, and logging's fallback does not print it again on
    stderr. With ``--json`` nothing changes: the notices are in the report (stdout holds one JSON object),
    and logging prints them on stderr as any warning."""
    if as_json:
        yield
        return
    logger = logging.getLogger(NOTICE_LOGGER)
    handler = _NoticeEcho()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def require_run_id(run_id: str | None) -> str | None:
    """``--run-id`` as given, or None when left out; an empty or blank value (an unset shell variable) is a
    usage error rather than silently becoming a new run ID, which would detach a retry from its run."""
    if run_id is not None and not run_id.strip():
        raise DponeError(
            ErrorCode.USAGE,
            "--run-id is empty (an unset shell variable?): give the run's ID, or leave --run-id out for a new run",
            details={"option": "--run-id"},
        )
    return run_id


def exit_code_for(err: DponeError) -> int:
    """The code's exit code, from the one error table in ``contracts/errors.py``."""
    return spec_of(err.code).exit_code


def debug_enabled() -> bool:
    """``--debug`` on the command line, or ``DPONE_DEBUG=1`` in the environment."""
    if os.environ.get("DPONE_DEBUG", "").strip().lower() in ("1", "true", "yes"):
        return True
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return _debug_requested
    return bool(ctx.find_root().meta.get(DEBUG_META_KEY, False))


def fail(err: DponeError, as_json: bool) -> NoReturn:
    """Report a DponeError and exit with its code."""
    if debug_enabled():
        _print_traceback(err)
    if as_json:
        print_json(err.to_json())
    else:
        click.echo(err.render(), err=True)
    sys.exit(exit_code_for(err))


def fail_unexpected(exc: BaseException, as_json: bool) -> NoReturn:
    """Report an exception we did not anticipate: type name only, never its message; exit 1."""
    debug = debug_enabled()
    if debug:
        _print_traceback(exc)
    kind = type(exc).__name__
    message = f"unexpected internal failure ({kind})"
    hint = "see the traceback above" if debug else "rerun with --debug or DPONE_DEBUG=1 to see the traceback"
    if as_json:
        print_json({"error": UNEXPECTED_CODE, "message": message, "details": {"exception_type": kind}})
    else:
        click.echo(f"error: {UNEXPECTED_CODE}: {message}\n  {hint}", err=True)
    sys.exit(EXIT_FAILED)


@contextmanager
def reporting_errors(as_json: bool) -> Iterator[None]:
    """Wrap a command body: DponeError -> :func:`fail`; any other exception -> :func:`fail_unexpected`.

    ``SystemExit``, ``KeyboardInterrupt`` and click's own exceptions pass through untouched.
    """
    try:
        yield
    except DponeError as err:
        fail(err, as_json)
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except Exception as exc:
        fail_unexpected(exc, as_json)


def dpone_invocation(argv0: str | None = None) -> str:
    """How to run ``dpone`` again, so that a printed next step works when pasted into the same shell.

    ``dpone`` when that name on PATH is this very program; its full path when it was started by path
    (a virtualenv's ``bin/dpone`` that is not on PATH); ``python -m ...`` when it was not started as
    ``dpone`` at all.
    """
    program = sys.argv[0] if argv0 is None and sys.argv else (argv0 or "")
    if Path(program).name != "dpone":
        return f"{shlex.quote(sys.executable)} -m airflow_provider_dpone.cli.main"
    started = shutil.which(program) if os.sep not in program else program
    on_path = shutil.which("dpone")
    if started and on_path and _same_file(started, on_path):
        return "dpone"
    return shlex.quote(str(Path(started or program).absolute()))


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def print_json(value: Any) -> None:
    """One JSON document on stdout, keys sorted, for scripts."""
    click.echo(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str))


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Plain-text table with aligned columns: integer columns right-aligned, the rest left; None is ``-``."""
    raw = [list(row) for row in rows]
    for row in raw:
        if len(row) != len(headers):
            raise ValueError("every table row needs one cell per header")
    numeric = [
        any(_is_int(row[i]) for row in raw) and all(_is_int(row[i]) or row[i] is None for row in raw)
        for i in range(len(headers))
    ]
    body = [[cell_text(value) for value in row] for row in raw]
    widths = [max([len(h), *(len(row[i]) for row in body)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if numeric[i] else cell.ljust(widths[i]) for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers)), *(line(row) for row in body)])


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """A table on stdout: drawn by rich on a terminal (as the progress bar is), plain aligned text otherwise.

    The plain form is what scripts and logs get: stable, one line per row, never cut to a terminal width.
    """
    materialized = [list(row) for row in rows]
    text = render_table(headers, materialized)  # validates the rows whatever prints them
    if sys.stdout.isatty() and _print_rich_table(headers, materialized):
        return
    click.echo(text)


def _print_rich_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> bool:
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # rich comes with Airflow; without it the plain table is printed
        return False
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False)
    for i, header in enumerate(headers):
        numeric = any(_is_int(row[i]) for row in rows) and all(
            _is_int(row[i]) or row[i] is None for row in rows
        )
        table.add_column(header, justify="right" if numeric else "left", no_wrap=True, overflow="fold")
    for row in rows:
        table.add_row(*(cell_text(value) for value in row))
    Console(file=sys.stdout, soft_wrap=True).print(table)
    return True


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def cell_text(value: object) -> str:
    """One value as tables print it: ``-`` for None, on one line."""
    if value is None:
        return "-"
    text = str(value)
    return text.replace("\n", " ").replace("\t", " ")


def _print_traceback(exc: BaseException) -> None:
    click.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)
