"""``dpone manifest validate``: strict validation, the normalized manifest and its semantic identity."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import click

from airflow_provider_dpone.cli.output import print_json, reporting_errors
from airflow_provider_dpone.contracts.capsule import QualityPolicy
from airflow_provider_dpone.contracts.manifest import Manifest


@click.group("manifest")
def manifest_group() -> None:
    """Work with transfer manifests (no connection is opened)."""


@manifest_group.command("validate")
@click.argument("manifest", metavar="MANIFEST", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def validate(manifest: str, as_json: bool) -> None:
    """Validate MANIFEST strictly; print its normalized form and semantic identity.

    Exit 0 when valid, 2 when invalid (every problem is listed, with its path and line).
    """
    with reporting_errors(as_json):
        from airflow_provider_dpone.manifests.loader import load_manifest

        loaded = load_manifest(manifest)
        policy = _quality_policy(loaded.manifest)
        connections = _connections(loaded.manifest.model_dump(mode="json"), os.environ)
    if as_json:
        print_json(
            {
                "valid": True,
                "manifest": manifest,
                "identity": loaded.identity,
                "route": loaded.route.model_dump(mode="json"),
                "normalized": loaded.normalized,
                "connections": connections,
                "quality_policy": policy.model_dump(mode="json"),
            }
        )
        return
    click.echo(f"manifest {manifest} is valid")
    click.echo(f"route:     {loaded.route.describe()}")
    click.echo(f"identity:  {loaded.identity}")
    checks = ", ".join(f"{c.check.value}({','.join(c.columns)}):{c.severity.value}" for c in policy.checks)
    click.echo(f"quality:   {len(policy.checks)} check(s){': ' + checks if checks else ''}")
    click.echo("connections:")
    for role, info in connections.items():
        if info["form"] == "inline":
            click.echo(f"  {role:<12} inline {info['value']}")
        else:
            state = "set" if info["defined"] else "NOT SET"
            click.echo(f"  {role:<12} {info['value']} (from {info['variable']}: {state})")
    click.echo("normalized:")
    click.echo(json.dumps(loaded.normalized, indent=2, sort_keys=True, ensure_ascii=False))


def _quality_policy(manifest: Manifest) -> QualityPolicy:
    """The quality policy exactly as ``dpone run`` builds it (the loader already listed every problem)."""
    from airflow_provider_dpone.runtime.quality.policy import build_policy

    return build_policy(manifest.quality, durable=manifest.sink.options.durable_quality_replay)


def _connections(normalized: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """How each connection will be resolved: inline, or from which variable (and whether it is set).

    Informational only: a variable that is not set does not make the manifest invalid.
    """
    from airflow_provider_dpone.connections import env_var_name, is_inline

    result: dict[str, dict[str, Any]] = {}
    for role in ("source", "sink", "checkpoints"):
        value = str(normalized[role]["connection"])
        if is_inline(value):
            result[role] = {"value": value, "form": "inline"}
        else:
            variable = env_var_name(value)
            result[role] = {
                "value": value,
                "form": "env",
                "variable": variable,
                "defined": bool(env.get(variable, "").strip()),
            }
    return result


def register(group: click.Group) -> None:
    group.add_command(manifest_group)
