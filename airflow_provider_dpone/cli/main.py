"""``dpone``: the root click group, and the list of modules that contribute its commands.

Each module in :data:`COMMAND_MODULES` lives in this package and either exposes ``register(group)``, which
adds its command(s) to the root group, or defines its top-level click commands. Adding a command is one
line here; a listed module that cannot be imported fails ``dpone`` at once. Modules keep their heavy
imports inside the command functions so ``dpone --help`` stays fast.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import click

from airflow_provider_dpone import __version__
from airflow_provider_dpone.cli.output import DEBUG_META_KEY, fail_unexpected, print_json, remember_debug
from airflow_provider_dpone.contracts.errors import ErrorCode

#: Command modules, relative to this package. Order is the order of ``dpone --help``'s listing.
COMMAND_MODULES: tuple[str, ...] = (
    "run_cmd",
    "demo_cmd",
    "checkpoints_cmd",
    "guard_cmd",
    "manifest_cmd",
    "replay_cmd",
    "runbook_cmd",
)


_ARGS_KEY = "dpone.args"


class _RootGroup(click.Group):
    """click's own usage errors (a missing option, a directory for a file) of a ``--json`` invocation as one
    JSON object on stdout, as every other failure is: click printed them as text on stderr and left stdout
    empty, so a script parsing it failed to decode instead of reading ``usage_error``."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        given = list(args)
        ctx = super().make_context(info_name, args, parent=parent, **extra)
        ctx.meta[_ARGS_KEY] = given
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            if "--json" not in ctx.meta.get(_ARGS_KEY, ()):
                raise
            print_json({"error": ErrorCode.USAGE.value, "message": exc.format_message(), "details": {}})
            ctx.exit(exc.exit_code)


@click.group(
    cls=_RootGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}
)
@click.version_option(__version__, "--version", prog_name="dpone", message="%(prog)s %(version)s")
@click.option(
    "--debug",
    is_flag=True,
    default=False,
    help="Print tracebacks of failures (also DPONE_DEBUG=1). Tracebacks may contain sensitive text.",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Move SQL Server / SQLite tables into ClickHouse in partitions, with a fail-closed commit guard.

    Exit codes: 0 success, 1 failed, 2 usage or invalid manifest, 3 route blocked (manual reconciliation),
    4 route busy (another run holds the target; retry later).
    """
    ctx.meta[DEBUG_META_KEY] = debug
    remember_debug(debug)


def register_commands(group: click.Group, modules: Sequence[str] = COMMAND_MODULES) -> list[str]:
    """Import each command module and let it register itself; returns the modules registered."""
    for name in modules:
        _register_module(group, importlib.import_module(f"{__package__}.{name}"))
    return list(modules)


def _register_module(group: click.Group, module: ModuleType) -> None:
    register = getattr(module, "register", None)
    if callable(register):
        register(group)
        return
    # Fallback for a module without register(): its top-level click commands that are not
    # sub-commands of a group defined in the same module.
    commands = [value for value in vars(module).values() if isinstance(value, click.Command)]
    nested = {
        id(sub) for value in commands if isinstance(value, click.Group) for sub in value.commands.values()
    }
    for command in commands:
        own = getattr(command.callback, "__module__", None) == module.__name__
        if id(command) not in nested and own:
            group.add_command(command)


#: Help of a ``--json`` flag whose command gave none.
JSON_HELP = "Print one JSON object on stdout instead of text (errors too); nothing else goes to stdout."


def complete_help(command: click.Command) -> None:
    """Whole summaries in ``--help`` listings and a help text on every ``--json``, for the whole tree.

    click cuts a command's summary in its group's listing at about 45 characters; the summary becomes the
    command's whole first help paragraph instead, wrapped by the formatter.
    """
    if command.short_help is None and command.help:
        first = inspect.cleandoc(command.help).split("\n\n", 1)[0]
        command.short_help = " ".join(first.split())
    for param in command.params:
        if isinstance(param, click.Option) and param.name == "as_json" and not param.help:
            param.help = JSON_HELP
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            complete_help(sub)


register_commands(cli)
complete_help(cli)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``dpone``)."""
    remember_debug(False)
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        cli.main(args=args, prog_name="dpone")
    except Exception as exc:  # escaped every command's own handler: still no message, still exit 1
        fail_unexpected(
            exc, as_json="--json" in args
        )  # a --json command prints one JSON object, a failure too


if __name__ == "__main__":
    main()
