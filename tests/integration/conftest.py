"""Fixtures shared by the integration tests: the route rig's checkpoint store and demo workspace, the
target reader rig's black-hole port, and the chDB sink rig's sink."""

from tests.integration.chdb_sink_rig import chdb_sink
from tests.integration.route_rig import base, store_url
from tests.integration.target_reader_rig import black_hole

__all__ = ["base", "black_hole", "chdb_sink", "store_url"]
