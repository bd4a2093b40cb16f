"""A route's guard status, read from its checkpoint store: what a DAG waits on instead of burning retries.

Read-only: the latest checkpoints of every route writing the manifest's target table, classified by the
same scan a run starts with. It opens neither the source nor the target and never takes the route's lease
(a probe of the lease could make a starting run fail as busy), so "a run holds the route" is not reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.manifests.loader import LoadedManifest
from airflow_provider_dpone.runtime.guard.route_guard import BlockedPartition, scan_route
from airflow_provider_dpone.runtime.route_family import load_family


@dataclass(frozen=True)
class RouteStatus:
    """``clear``: no partition of the target blocks a run; ``blocked``: the partitions below do."""

    route: str
    blocked: tuple[BlockedPartition, ...]
    invalid: tuple[BlockedPartition, ...]

    @property
    def clear(self) -> bool:
        return not self.blocked and not self.invalid

    @property
    def state(self) -> str:
        return "clear" if self.clear else "blocked"

    def as_json(self) -> dict[str, Any]:
        """Safe facts only: route, partition and batch IDs, phases."""
        return {
            "route": self.route,
            "state": self.state,
            "blocked": [b.as_json() for b in self.blocked],
            "invalid": [b.as_json() for b in self.invalid],
        }

    def describe(self) -> str:
        if self.clear:
            return f"route {self.route} is clear"
        lines = [f"route {self.route} is blocked: {len(self.blocked) + len(self.invalid)} partition(s)"]
        lines += [
            f"  partition {b.label}  phase={b.phase}  batch={b.checkpoint_batch_id}" for b in self.blocked
        ]
        lines += [f"  partition {b.label}  guard invalid: {b.phase}" for b in self.invalid]
        return "\n".join(lines)


def route_status(loaded: LoadedManifest, store_endpoint: EndpointDescriptor) -> RouteStatus:
    """The status of ``loaded``'s route in the checkpoint store at ``store_endpoint``."""
    from airflow_provider_dpone.adapters.checkpoint_sql import store_from_endpoint
    from airflow_provider_dpone.adapters.sources.route_naming import SourceRouteNaming

    naming = SourceRouteNaming(loaded.manifest.source)
    route = naming.canonical(loaded.manifest.route())
    store = store_from_endpoint(store_endpoint, loaded.manifest_dir)
    try:
        family = load_family(store, route, naming)
    finally:
        store.close()
    scan = scan_route(family.target_wide)
    return RouteStatus(route=route.describe(), blocked=scan.unresolved, invalid=scan.invalid)
