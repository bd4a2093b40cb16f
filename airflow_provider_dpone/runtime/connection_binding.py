"""Whether a route's connections still lead where its newest commit went (ADR 0079 and 0088), as one check.

A run makes it before anything is read, and ``route_status`` (the ``RouteClearSensor``) makes the same one
from the store alone: the sensor said "clear" while every transfer behind it stopped with
``native_transfer_route_identity_changed``.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.ports.route_naming import RouteNaming
from airflow_provider_dpone.runtime.route_family import RouteFamily, sibling_committed
from airflow_provider_dpone.runtime.source_binding import (
    connection_reference,
    form_naming_no_file,
    require_same_source,
    source_reference,
)
from airflow_provider_dpone.runtime.target_binding import require_same_target


@dataclass(frozen=True)
class ConnectionBinding:
    """What a run's checkpoints record of its connections (the composition root computes it; None: not
    known, not checked)."""

    source: str | None = None
    #: what earlier releases recorded of the same connection: an inline source URI as written, or the bare
    #: name of a connection with a relative or ``~`` path (taken as it only where it names its file: an
    #: absolute path; ``source_binding.names_its_file``)
    source_as_written: str | None = None
    target: str | None = None
    #: where the target connection leads (a digest of server and database, or of the chDB folder)
    target_place: str | None = None


def siblings_of(family: RouteFamily, naming: RouteNaming) -> list[PartitionCheckpoint]:
    """The same source table's commits under another strategy (none to look for when every checkpoint of
    the target is the route's own: the common case costs one comparison)."""
    if len(family.target_wide) == len(family.own):
        return []
    return sibling_committed(family, naming)


def require_bound_connections(
    family: RouteFamily, binding: ConnectionBinding, manifest_ref: str, naming: RouteNaming
) -> None:
    """Stop (``native_transfer_route_identity_changed``) when the newest commit of the route, or of a
    sibling route, came from another source connection or went to another target place."""
    canonical = family.canonical_checkpoints()
    siblings = siblings_of(family, naming)
    if binding.source is not None:
        written = binding.source_as_written
        fileless = form_naming_no_file(written)
        require_same_source(
            family.route,
            canonical,
            source_reference(binding.source),
            manifest_ref,
            siblings=siblings,
            earlier_forms=(source_reference(written),) if written is not None and fileless is None else (),
            earlier_forms_without_file=() if fileless is None else (fileless,),
        )
    if binding.target is not None:
        require_same_target(
            family.route,
            canonical,
            connection_reference(binding.target),
            manifest_ref,
            siblings,
            binding.target_place,
        )
