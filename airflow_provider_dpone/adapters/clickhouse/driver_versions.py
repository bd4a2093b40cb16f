"""The driver versions that were tested, and the error that says so when a connect fails outside them.

Measured (docs/guide/compatibility.md): clickhouse-connect works on both paths only at 1.6.x — 1.5 and
older cannot open chDB ("Unrecognized ClickHouse interface"), 1.7 and newer cannot talk to a 18.16 server
(their connect-time settings query names a column 18.16 lacks: server code 47) — and chdb works from 4.0
(3.x fails every query through clickhouse-connect 1.6). pyproject.toml declares the same ranges.

The error keeps its code (``target_unreachable``) and says what is known to be the cause: the driver's
error class, the endpoint's host:port (server) and the installed versions beside the tested ranges. Never
the exception's message: it may carry a server response.
"""

from __future__ import annotations

import re
from importlib import metadata

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: (distribution, lowest tested release, first release known not to work): pyproject.toml's ranges.
Range = tuple[str, tuple[int, ...], tuple[int, ...]]
CLICKHOUSE_CONNECT_RANGE: Range = ("clickhouse-connect", (1, 6), (1, 7))
CHDB_RANGE: Range = ("chdb", (4,), (5,))
#: ClickHouse's UNKNOWN_IDENTIFIER: at connect time, the driver's own setup query does not fit the server.
_UNKNOWN_IDENTIFIER = 47
_SERVER_CODE = re.compile(r"\bCode: (\d+)")
COMPATIBILITY_DOC = "docs/guide/compatibility.md"


def installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def in_range(version: str | None, bounds: Range) -> bool:
    if version is None:
        return False
    _, low, high = bounds
    release = _release(version)
    return low <= release < high


def spec(bounds: Range) -> str:
    """The requirement as pyproject.toml writes it, e.g. ``clickhouse-connect>=1.6,<1.7``."""
    name, low, high = bounds
    return f"{name}>={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"


def server_code(exc: BaseException) -> int | None:
    """The server's numeric error code (read from the driver's error, which is not shown)."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return code
    found = _SERVER_CODE.search(str(exc))
    return int(found.group(1)) if found else None


def version_mismatch(endpoint: EndpointDescriptor, exc: BaseException) -> DponeError | None:
    """The error for a failed connect that a driver/server version mismatch explains, else None.

    Server: the driver's connect-time query was refused with UNKNOWN_IDENTIFIER (as 1.7+ is by 18.16).
    chDB: clickhouse-connect or chdb is outside its tested range (the failures there have no common code).
    """
    driver = installed(CLICKHOUSE_CONNECT_RANGE[0])
    driver_ok = in_range(driver, CLICKHOUSE_CONNECT_RANGE)
    error_class = type(exc).__name__
    details: dict[str, object] = {
        "connection": endpoint.name,
        "error_class": error_class,
        "cause": "driver_version_mismatch",
        "clickhouse_connect": driver,
        "tested": [spec(CLICKHOUSE_CONNECT_RANGE)],
    }
    if endpoint.interface is ClickHouseInterface.CHDB:
        chdb = installed(CHDB_RANGE[0])
        if driver_ok and in_range(chdb, CHDB_RANGE):
            return None
        details.update(interface="chdb", chdb=chdb, tested=[spec(CLICKHOUSE_CONNECT_RANGE), spec(CHDB_RANGE)])
        return DponeError(
            ErrorCode.TARGET_UNREACHABLE,
            f"could not open the embedded ClickHouse of {endpoint.describe()}: {error_class} from "
            f"clickhouse-connect {driver} with chdb {chdb}, a version pair outside the tested ranges "
            f"({spec(CLICKHOUSE_CONNECT_RANGE)}, {spec(CHDB_RANGE)})",
            details=details,
            hint_lines=(
                f"install tested versions: pip install '{spec(CLICKHOUSE_CONNECT_RANGE)}' '{spec(CHDB_RANGE)}'",
                f"compatibility table: {COMPATIBILITY_DOC}",
            ),
        )
    if server_code(exc) != _UNKNOWN_IDENTIFIER:
        return None  # refused, timed out, wrong password...: not a version question
    port = endpoint.port if endpoint.port is not None else (8443 if endpoint.secure else 8123)
    address = f"{endpoint.host or 'localhost'}:{port}"
    details.update(interface="http", endpoint=address, server_code=_UNKNOWN_IDENTIFIER)
    return DponeError(
        ErrorCode.TARGET_UNREACHABLE,
        f"clickhouse-connect {driver} cannot talk to the ClickHouse server at {address} "
        f"({endpoint.describe()}): {error_class} in the driver's connect-time setup, a driver/server version "
        f"mismatch (tested: {spec(CLICKHOUSE_CONNECT_RANGE)} with server 18.16)",
        details=details,
        hint_lines=(
            f"install a tested driver: pip install '{spec(CLICKHOUSE_CONNECT_RANGE)}'",
            f"compatibility table: {COMPATIBILITY_DOC}",
        ),
    )
