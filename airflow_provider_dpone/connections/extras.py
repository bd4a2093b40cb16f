"""The one parser of connection extras: which keys each endpoint kind admits and what they become.

Both the CLI (``AIRFLOW_CONN_*`` URI or JSON) and the Airflow hooks (a live ``Connection``) reach it
through :func:`~airflow_provider_dpone.connections.airflow_form.descriptor_from_fields`, so an extra
means the same in the transfer, the hook and the reader worker. An unknown key is refused (a typo
must not silently fall back to a default); errors name the key, never its value.

``client_kwargs`` (a free-form mapping passed straight to clickhouse-connect) is refused on purpose:
it could switch off TLS checks, point the client at another host, or change the compression and
format the sink's inserts rely on, behind the endpoint's back. The safe parts have their own keys.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from typing import Any

from airflow_provider_dpone.contracts.endpoints import (
    MAX_SESSION_SETTINGS,
    MAX_SETTING_VALUE_CHARS,
    MAX_TIMEOUT_S,
    SETTING_NAME,
    TDS_VERSIONS,
    ClickHouseInterface,
    EndpointKind,
)

#: Extras each endpoint kind admits (``backend`` of ``dpone_checkpoints`` is folded away before).
MSSQL_EXTRAS = frozenset({"tds_version", "login_timeout", "query_timeout"})
SQLITE_EXTRAS = frozenset({"path"})
POSTGRES_EXTRAS = frozenset({"secure"})
CLICKHOUSE_HTTP_EXTRAS = frozenset(
    {
        "interface",
        "database",
        "secure",
        "verify",
        "connect_timeout",
        "send_receive_timeout",
        "session_settings",
    }
)
CHDB_EXTRAS = frozenset({"interface", "path", "database", "session_settings"})
#: Keys refused with their own reason rather than as unknown.
REFUSED_EXTRAS: Mapping[str, str] = {
    "client_kwargs": "is not supported: free-form client options could bypass TLS checks or the sink's "
    "insert format; use secure, verify, connect_timeout, send_receive_timeout or session_settings",
}
#: Form switches at their neutral value are ignored where they do not apply (the UI form stores a
#: checkbox's value for every connection of the type, e.g. ``secure: false`` on a SQLite store).
NEUTRAL_EXTRAS: Mapping[str, bool] = {"secure": False, "verify": True}
#: Seconds extras -> descriptor fields.
SECONDS_EXTRAS: Mapping[str, str] = {
    "connect_timeout": "connect_timeout_s",
    "send_receive_timeout": "receive_timeout_s",
    "login_timeout": "login_timeout_s",
    "query_timeout": "query_timeout_s",
}
_PREFIX = "extra__"


class ExtraError(ValueError):
    """An extra that cannot be admitted; ``reason`` names the key, never the value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def allowed_extras(kind: EndpointKind, interface: ClickHouseInterface | None = None) -> frozenset[str]:
    if kind is EndpointKind.MSSQL:
        return MSSQL_EXTRAS
    if kind is EndpointKind.SQLITE:
        return SQLITE_EXTRAS
    if kind is EndpointKind.POSTGRES:
        return POSTGRES_EXTRAS
    return CHDB_EXTRAS if interface is ClickHouseInterface.CHDB else CLICKHOUSE_HTTP_EXTRAS


def normalized_extra(extra: Mapping[str, Any]) -> dict[str, Any]:
    """Drop unset values (the UI stores null or "" for an empty field) and Airflow 2's field prefix
    (``extra__dpone_mssql__tds_version`` -> ``tds_version``)."""
    result: dict[str, Any] = {}
    for key, value in extra.items():
        name = str(key)
        if name.startswith(_PREFIX) and name.count("__") >= 2:
            name = name.split("__", 2)[2]
        if value is None or value == "":
            continue
        result[name] = value
    return result


def check_keys(
    extra: Mapping[str, Any],
    kind: EndpointKind,
    interface: ClickHouseInterface | None,
    *,
    from_uri_query: bool = False,
) -> None:
    """Refuse the first key (sorted) that this endpoint kind does not admit. An unknown key of a URI's query
    (``from_uri_query``, or any extra of an Airflow connection, which may have been one) is never named, only
    the known key it is close to: an unencoded ``?`` in a password puts the rest of it there, and the error
    printed a piece of it as the key."""
    allowed = allowed_extras(kind, interface)
    for key in sorted(extra):
        if key in REFUSED_EXTRAS:
            raise ExtraError(f"the connection extra {safe_key(key)!r} {REFUSED_EXTRAS[key]}")
        if key not in allowed:
            if key in NEUTRAL_EXTRAS and _is_neutral(key, extra[key]):
                continue
            where = kind.value if interface is None else f"{kind.value}/{interface.value}"
            close = difflib.get_close_matches(key.lower(), sorted(allowed), n=1, cutoff=0.75)
            if from_uri_query:
                raise ExtraError(
                    f"the connection names an unknown extra for a {where} connection (not shown: a '?' in an "
                    "unencoded password puts part of it there; write it as '%3F')"
                    + (f" (did you mean {close[0]!r}?)" if close else "")
                    + f" (known: {', '.join(sorted(allowed))})"
                )
            raise ExtraError(
                f"unknown connection extra {safe_key(key)!r} for a {where} connection "
                + (f"(did you mean {close[0]!r}?) " if close else "")
                + f"(known: {', '.join(sorted(allowed))})"
            )


def _is_neutral(key: str, value: object) -> bool:
    try:
        return flag(key, value) is NEUTRAL_EXTRAS[key]
    except ExtraError:
        return False


def descriptor_extras(extra: Mapping[str, Any]) -> dict[str, Any]:
    """Descriptor fields for the typed extras present (keys already checked)."""
    fields: dict[str, Any] = {}
    for key, field_name in SECONDS_EXTRAS.items():
        if key in extra:
            fields[field_name] = seconds(key, extra[key])
    if "verify" in extra:
        fields["verify"] = flag("verify", extra["verify"])
    if "tds_version" in extra:
        fields["tds_version"] = tds_version(extra["tds_version"])
    if "session_settings" in extra:
        fields["session_settings"] = session_settings(extra["session_settings"])
    return fields


def seconds(key: str, raw: object) -> int:
    """A whole number of seconds from 1 to :data:`MAX_TIMEOUT_S` (a number or, from a URI, digits)."""
    value: object = raw.strip() if isinstance(raw, str) else raw
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TIMEOUT_S:
        raise ExtraError(
            f"the connection extra {key!r} must be a whole number of seconds from 1 to {MAX_TIMEOUT_S}"
        )
    return value


def flag(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
    raise ExtraError(f"the connection extra {key!r} must be true or false")


def tds_version(value: object) -> str:
    text = value.strip() if isinstance(value, str) else None
    if text not in TDS_VERSIONS:
        raise ExtraError(
            "the connection extra 'tds_version' must be one of " + ", ".join(sorted(TDS_VERSIONS))
        )
    return text


def session_settings(value: object) -> dict[str, bool | int | float | str]:
    """A mapping of setting name -> scalar, as an object or (from a URI) a JSON object string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise ExtraError("the connection extra 'session_settings' is not valid JSON") from None
    if not isinstance(value, dict):
        raise ExtraError("the connection extra 'session_settings' must be an object of setting name -> value")
    if len(value) > MAX_SESSION_SETTINGS:
        raise ExtraError(
            f"the connection extra 'session_settings' holds more than {MAX_SESSION_SETTINGS} settings"
        )
    result: dict[str, bool | int | float | str] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not SETTING_NAME.fullmatch(name):
            raise ExtraError(
                "the connection extra 'session_settings' has a setting name that is not a lower-case identifier"
            )
        if not isinstance(item, (bool, int, float, str)):
            raise ExtraError(f"the connection extra 'session_settings' setting {name!r} must be a scalar")
        if isinstance(item, str) and (len(item) > MAX_SETTING_VALUE_CHARS or not item.isprintable()):
            raise ExtraError(
                f"the connection extra 'session_settings' setting {name!r} must be printable text of at most "
                f"{MAX_SETTING_VALUE_CHARS} characters"
            )
        if isinstance(item, float) and not math.isfinite(item):
            raise ExtraError(
                f"the connection extra 'session_settings' setting {name!r} must be a finite number"
            )
        result[name] = item
    return result


def safe_key(key: str) -> str:
    shown = key if key.isprintable() else repr(key)
    return shown if len(shown) <= 40 else shown[:40] + "..."
