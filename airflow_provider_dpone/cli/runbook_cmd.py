"""`dpone runbook [guard|replay]`: print a runbook shipped inside the package.

A task log or an error line names this command rather than a repository path, because the on-call
operator has the installed wheel, not the source tree. The texts are package data
(``airflow_provider_dpone/runbooks/``), kept identical to ``docs/runbook/`` by a test.
"""

from __future__ import annotations

from importlib import resources

import click

#: topic -> file in airflow_provider_dpone/runbooks/
RUNBOOKS: dict[str, str] = {
    "guard": "manual-reconciliation.md",
    "replay": "pending-capsules.md",
}


def runbook_text(topic: str) -> str:
    """The runbook of ``topic`` as shipped with this installation."""
    return (resources.files("airflow_provider_dpone") / "runbooks" / RUNBOOKS[topic]).read_text(
        encoding="utf-8"
    )


@click.command("runbook")
@click.argument("topic", type=click.Choice(sorted(RUNBOOKS)), default="guard", required=False)
def runbook_command(topic: str) -> None:
    """Print a runbook: guard (a blocked route, manual reconciliation; the default) or replay
    (durable quality capsules and reader guards)."""
    click.echo(runbook_text(topic), nl=False)


def register(group: click.Group) -> None:
    group.add_command(runbook_command)
