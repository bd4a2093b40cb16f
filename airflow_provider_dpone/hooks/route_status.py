"""A route's guard status, read from its checkpoint store: what a DAG waits on instead of burning retries.

Read-only: the latest checkpoints of every route writing the manifest's target table, classified by the
same scan a run starts with, and who holds the target's lease (``busy``: another run is writing it), read
from the store's lock tables without taking the lease (taking it, even for a moment, could make a starting
run fail as busy). It opens neither the source nor the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.manifests.loader import LoadedManifest
from airflow_provider_dpone.runtime.guard.route_guard import BlockedPartition, scan_route
from airflow_provider_dpone.runtime.route_family import load_family

if TYPE_CHECKING:
    from airflow_provider_dpone.adapters.checkpoint_sql.lease_holder import LeaseHolder


@dataclass(frozen=True)
class RouteStatus:
    """``clear``: no partition of the target blocks a run; ``blocked``: the partitions below do;
    ``busy``: nothing blocks, but another run holds the target's lease (``holder``) and is writing it.

    ``blocked`` wins over ``busy`` (on-call must act either way); ``holder`` is reported in both.
    """

    route: str
    blocked: tuple[BlockedPartition, ...]
    invalid: tuple[BlockedPartition, ...]
    holder: LeaseHolder | None = None

    @property
    def clear(self) -> bool:
        """No partition blocks (a busy route is clear of blocks; see :attr:`busy`)."""
        return not self.blocked and not self.invalid

    @property
    def busy(self) -> bool:
        return self.holder is not None

    @property
    def state(self) -> str:
        if not self.clear:
            return "blocked"
        return "busy" if self.busy else "clear"

    def as_json(self) -> dict[str, Any]:
        """Safe facts only: route, partition and batch IDs, phases."""
        return {
            "route": self.route,
            "state": self.state,
            "blocked": [b.as_json() for b in self.blocked],
            "invalid": [b.as_json() for b in self.invalid],
            "holder": self.holder.as_json() if self.holder else None,
        }

    def describe(self) -> str:
        held = f"another run holds the target's lease ({self.holder.describe()})" if self.holder else ""
        if self.clear:
            return f"route {self.route} is busy: {held}" if held else f"route {self.route} is clear"
        lines = [f"route {self.route} is blocked: {len(self.blocked) + len(self.invalid)} partition(s)"]
        lines += [f"  {held}"] if held else []
        lines += [
            f"  partition {b.label}  phase={b.phase}  batch={b.checkpoint_batch_id}" for b in self.blocked
        ]
        lines += [f"  partition {b.label}  guard invalid: {b.phase}" for b in self.invalid]
        return "\n".join(lines)


def route_status(loaded: LoadedManifest, store_endpoint: EndpointDescriptor) -> RouteStatus:
    """The status of ``loaded``'s route in the checkpoint store at ``store_endpoint``."""
    from airflow_provider_dpone.adapters.checkpoint_sql import store_from_endpoint, store_url_for
    from airflow_provider_dpone.adapters.checkpoint_sql.lease_holder import lease_holder
    from airflow_provider_dpone.adapters.sources.route_naming import SourceRouteNaming

    naming = SourceRouteNaming(loaded.manifest.source)
    route = naming.canonical(loaded.manifest.route())
    store = store_from_endpoint(store_endpoint, loaded.manifest_dir)
    try:
        family = load_family(store, route, naming)
    finally:
        store.close()
    scan = scan_route(family.target_wide)
    holder = lease_holder(store_url_for(store_endpoint, loaded.manifest_dir), loaded.route.target_table)
    return RouteStatus(route=route.describe(), blocked=scan.unresolved, invalid=scan.invalid, holder=holder)
