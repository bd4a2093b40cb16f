"""Fixtures shared by the integration tests: the route rig's checkpoint store and demo workspace."""

from tests.integration.route_rig import base, store_url

__all__ = ["base", "store_url"]
