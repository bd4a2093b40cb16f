"""Fixtures shared by the integration tests: the route rig's checkpoint store and demo workspace, the
target reader rig's black-hole port, the chDB sink rig's sink, and the hand-made target rig's SQL Server
source."""

import pytest

from tests.integration.chdb_sink_rig import chdb_sink
from tests.integration.hand_made_target_rig import tds_orders_source
from tests.integration.route_rig import base, store_url, stores_for
from tests.integration.target_reader_rig import black_hole

__all__ = ["base", "black_hole", "chdb_sink", "store_url", "tds_orders_source"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The route rig's ``store_url``: the stores ``stores_for`` picks, unless the test chose its own (an
    ``indirect`` parametrization) or its module defines a ``store_url`` of its own."""
    if "store_url" not in metafunc.fixturenames or hasattr(metafunc.module, "store_url"):
        return
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
        if "store_url" in (names.replace(" ", "").split(",") if isinstance(names, str) else names):
            return
    metafunc.parametrize("store_url", stores_for(metafunc.function.__name__), indirect=True)
