"""Airflow's connection forms, read without importing Airflow.

An ``AIRFLOW_CONN_<NAME>`` variable holds either a URI (``mssql://user:pass@host:1433/db``) or, when it
starts with ``{``, a JSON object (``{"conn_type": ..., "host": ..., "extra": {...}}``). Both are parsed
the way Airflow parses them (``Connection._parse_from_uri`` / ``Connection.from_json``) into
:class:`ConnectionFields`, then mapped to an :class:`EndpointDescriptor`. The Airflow hooks can feed a
real ``Connection``'s fields through :func:`descriptor_from_fields` so both paths agree.

The provider's own connection types (``dpone_mssql``, ``dpone_clickhouse``, ``dpone_checkpoints``; in a
URI ``dpone-mssql://...``) are aliases of standard ones, folded by :func:`fold_dpone_conn_type`, so a
connection defined for the Airflow UI's dpone forms also works from the CLI.

Every failure is a :class:`ConnectionFormError` with a fixed reason: the value, which may hold a
password, is never repeated, and parser exceptions (whose text may quote it) are not chained.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from pydantic import SecretStr, ValidationError

from airflow_provider_dpone.connections.extras import (
    ExtraError,
    check_keys,
    descriptor_extras,
    normalized_extra,
)
from airflow_provider_dpone.contracts.endpoints import (
    ClickHouseInterface,
    EndpointDescriptor,
    EndpointKind,
)

#: Airflow ``conn_type`` (normalized) -> endpoint kind.
CONN_TYPES: Mapping[str, EndpointKind] = {
    "mssql": EndpointKind.MSSQL,
    "sqlite": EndpointKind.SQLITE,
    "postgres": EndpointKind.POSTGRES,
    "clickhouse": EndpointKind.CLICKHOUSE,
    "chdb": EndpointKind.CLICKHOUSE,
}

#: The provider's connection types that stand for one standard type each.
DPONE_CONN_TYPE_ALIASES: Mapping[str, str] = {"dpone_mssql": "mssql", "dpone_clickhouse": "clickhouse"}
#: The checkpoint-store type: SQLite or PostgreSQL, chosen by its extra ``backend``.
CHECKPOINTS_CONN_TYPE = "dpone_checkpoints"
CHECKPOINTS_BACKENDS = frozenset({"sqlite", "postgres"})

_JSON_KEYS = frozenset({"conn_type", "host", "login", "password", "port", "schema", "extra", "description"})
_EXTRA_KEY = "__extra__"


class ConnectionFormError(ValueError):
    """A connection value that cannot be admitted. ``reason`` never contains the value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ConnectionFields:
    """Airflow's connection fields (``schema`` is Airflow's name for the database / path part)."""

    conn_type: str
    host: str | None = None
    port: int | None = None
    schema: str | None = None
    login: str | None = None
    password: SecretStr | None = field(default=None, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the extras are a URI's query parameters, where an unencoded '?' in the password lands (never named)
    extra_from_uri_query: bool = False


def normalize_conn_type(conn_type: str) -> str:
    """Airflow's normalization: ``postgresql`` -> ``postgres``, ``-`` -> ``_``; lower-cased here too."""
    value = conn_type.strip().lower()
    if value == "postgresql":
        return "postgres"
    return value.replace("-", "_")


def parse_connection_value(value: str) -> ConnectionFields:
    """Parse an ``AIRFLOW_CONN_*`` value in URI or JSON form."""
    text = value.strip()
    if not text:
        raise ConnectionFormError("the connection value is empty")
    if text.startswith("{"):
        return fields_from_json(text)
    return fields_from_uri(text)


def fields_from_uri(uri: str) -> ConnectionFields:
    """Airflow's URI form: ``type://login:password@host:port/schema?extra_key=value``."""
    if uri.count("://") != 1:
        raise ConnectionFormError("the connection URI is malformed (expected exactly one '://')")
    try:
        parts = urlsplit(uri)
        port = parts.port
        login = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        host = _hostname(parts)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        # The parser's message may quote the URI (and so the password): do not chain it.
        raise ConnectionFormError("the connection URI is malformed") from None
    if not parts.scheme:
        raise ConnectionFormError("the connection URI has no scheme (connection type)")
    if "@" not in parts.netloc and (
        parts.netloc.endswith(":") or (parts.netloc and "@" in parts.path + parts.fragment)
    ):
        # 'login:' (or 'login:2024') then '/', '?' or '#': an unencoded one in the password ended the login
        # early, and the rest would be read as the database (sent to the login taken for a host) or as
        # extras: refuse the URI naming no part of it. A file path (no host part) may hold an '@'.
        raise ConnectionFormError(
            "the connection URI is malformed: a host part ending in ':', or an '@' after the host part (a "
            "'/', '?' or '#' in the password must be percent-encoded: '%2F', '%3F', '%23')"
        )
    quoted_schema = parts.path[1:]
    extra: dict[str, Any] = dict(query)
    from_query = _EXTRA_KEY not in extra
    if not from_query:
        extra = _json_object(extra[_EXTRA_KEY], what="the __extra__ query parameter")
    return ConnectionFields(
        conn_type=normalize_conn_type(parts.scheme),
        host=host or None,
        port=port,
        schema=unquote(quoted_schema) if quoted_schema else None,
        login=login,
        password=SecretStr(password) if password else None,
        extra=extra,
        extra_from_uri_query=from_query and bool(extra),
    )


def fields_from_json(text: str) -> ConnectionFields:
    """Airflow's JSON form: ``{"conn_type": ..., "host": ..., "login": ..., "extra": {...}}``."""
    data = _json_object(text, what="the connection JSON")
    unknown = sorted(set(data) - _JSON_KEYS)
    if unknown:
        raise ConnectionFormError(
            "the connection JSON has unexpected fields: " + ", ".join(_safe_key(k) for k in unknown)
        )
    conn_type = data.get("conn_type")
    if not isinstance(conn_type, str) or not conn_type.strip():
        raise ConnectionFormError("the connection JSON needs a string conn_type")
    raw_extra = data.get("extra")
    if raw_extra is None or raw_extra == "":
        extra: dict[str, Any] = {}
    elif isinstance(raw_extra, str):
        extra = _json_object(raw_extra, what="the connection JSON's extra")
    elif isinstance(raw_extra, dict):
        extra = raw_extra
    else:
        raise ConnectionFormError("the connection JSON's extra must be an object or a JSON string")
    password = _optional_str(data, "password")
    return ConnectionFields(
        conn_type=normalize_conn_type(conn_type),
        host=_optional_str(data, "host"),
        port=_port(data.get("port")),
        schema=_optional_str(data, "schema"),
        login=_optional_str(data, "login"),
        password=SecretStr(password) if password else None,
        extra=extra,
    )


def descriptor_from_fields(
    name: str, fields: ConnectionFields, *, manifest_dir: Path | None = None
) -> EndpointDescriptor:
    """Map Airflow connection fields to an endpoint descriptor.

    File paths (SQLite file, chDB directory) that are relative are resolved against ``manifest_dir``
    when given; nothing is opened or created.
    """
    fields = replace(fields, extra=normalized_extra(fields.extra))
    fields = fold_dpone_conn_type(fields)
    kind = CONN_TYPES.get(fields.conn_type)
    if kind is None:
        supported = ", ".join(sorted([*CONN_TYPES, *DPONE_CONN_TYPE_ALIASES, CHECKPOINTS_CONN_TYPE]))
        raise ConnectionFormError(f"unsupported connection type (supported: {supported})")
    try:
        interface = _interface(fields) if kind is EndpointKind.CLICKHOUSE else None
        check_keys(fields.extra, kind, interface, from_uri_query=fields.extra_from_uri_query)
        typed = descriptor_extras(fields.extra)
    except ExtraError as exc:
        raise ConnectionFormError(exc.reason) from None  # names the key, never the value
    try:
        if kind is EndpointKind.SQLITE:
            return _sqlite(name, fields, manifest_dir)
        if kind is EndpointKind.CLICKHOUSE:
            return _clickhouse(name, fields, manifest_dir, typed)
        return _server(name, kind, fields, typed)
    except ValidationError:
        raise ConnectionFormError("the connection has a field of the wrong type or out of range") from None


def fold_dpone_conn_type(fields: ConnectionFields) -> ConnectionFields:
    """Fold a dpone connection type onto the standard type it stands for; any other passes unchanged.

    ``dpone_checkpoints`` becomes ``sqlite`` or ``postgres`` by its extra ``backend``, read as the
    checkpoint-store hook reads it (no ``backend``: ``sqlite`` when the extra has a ``path``, else
    ``postgres``); ``backend`` itself is dropped from the extra. Idempotent.
    """
    alias = DPONE_CONN_TYPE_ALIASES.get(fields.conn_type)
    if alias is not None:
        return replace(fields, conn_type=alias)
    if fields.conn_type != CHECKPOINTS_CONN_TYPE:
        return fields
    backend = fields.extra.get("backend") or ("sqlite" if fields.extra.get("path") else "postgres")
    conn_type = normalize_conn_type(backend) if isinstance(backend, str) else ""
    if conn_type not in CHECKPOINTS_BACKENDS:
        raise ConnectionFormError(
            "a dpone_checkpoints connection's extra 'backend' must be 'sqlite' or 'postgres'"
        )
    extra = {key: value for key, value in fields.extra.items() if key != "backend"}
    return replace(fields, conn_type=conn_type, extra=extra)


def resolve_path(path: str, manifest_dir: Path | None) -> str:
    """Absolute, normalized form of a file path; relative paths hang off ``manifest_dir``'s real path (or
    the cwd), as an inline URI's do: the operator finds a manifest from the DAG file's real folder, the CLI
    from the path it is given, and a chDB target reached through a linked folder was "another target" to
    each in turn (exit 3, each rebaseline flipping it back). A link the path itself names is kept."""
    candidate = Path(os.path.expanduser(path))
    if not candidate.is_absolute():
        candidate = (
            Path(os.path.realpath(manifest_dir) if manifest_dir is not None else Path.cwd()) / candidate
        )
    return os.path.normpath(str(candidate))


def names_a_file_per_place(path: str) -> bool:
    """Whether ``path`` as written names a file per manifest folder (relative: ``resolve_path`` hangs it
    off the folder) or per user (``~``: each user's home; the Airflow worker's and an on-call user's are
    two files), rather than one file wherever it is used."""
    return not Path(path).is_absolute()


def _sqlite(name: str, fields: ConnectionFields, manifest_dir: Path | None) -> EndpointDescriptor:
    # Airflow's SqliteHook keeps the file in ``host``; the URI form ``sqlite:////abs.db`` puts it in ``schema``.
    raw = fields.host or fields.schema or _extra_str(fields.extra, "path")
    if not raw:
        raise ConnectionFormError("a sqlite connection needs a file path")
    return EndpointDescriptor(
        name=name,
        kind=EndpointKind.SQLITE,
        path=resolve_path(raw, manifest_dir),
        path_per_place=names_a_file_per_place(raw),
    )


def _clickhouse(
    name: str, fields: ConnectionFields, manifest_dir: Path | None, typed: Mapping[str, Any]
) -> EndpointDescriptor:
    interface = _interface(fields)
    if interface is ClickHouseInterface.CHDB:
        raw = _extra_str(fields.extra, "path")
        if not raw and fields.conn_type == "chdb":
            raw = fields.schema or fields.host
        if not raw:
            raise ConnectionFormError("a chdb connection needs a path (extra 'path', or chdb:///DIR)")
        return EndpointDescriptor(
            name=name,
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.CHDB,
            path=resolve_path(raw, manifest_dir),
            path_per_place=names_a_file_per_place(raw),
            database=_extra_str(fields.extra, "database"),
            **typed,
        )
    if not fields.host:
        raise ConnectionFormError("a clickhouse connection needs a host")
    return EndpointDescriptor(
        name=name,
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.HTTP,
        # one spelling of an IPv6 address: Airflow's URI form drops the brackets, the JSON form keeps them
        # (``::1`` and ``[::1]`` are one target; the client brackets it again for its URL)
        host=fields.host.removeprefix("[").removesuffix("]"),
        port=fields.port,
        database=fields.schema or _extra_str(fields.extra, "database"),
        user=fields.login,
        password=fields.password,
        secure=_bool(fields.extra.get("secure", False), what="secure"),
        **typed,
    )


def _server(
    name: str, kind: EndpointKind, fields: ConnectionFields, typed: Mapping[str, Any]
) -> EndpointDescriptor:
    if not fields.host:
        raise ConnectionFormError(f"a {kind.value} connection needs a host")
    return EndpointDescriptor(
        name=name,
        kind=kind,
        host=fields.host,
        port=fields.port,
        database=fields.schema or None,
        user=fields.login,
        password=fields.password,
        secure=_bool(fields.extra.get("secure", False), what="secure"),
        **typed,
    )


def _interface(fields: ConnectionFields) -> ClickHouseInterface:
    if fields.conn_type == "chdb":
        return ClickHouseInterface.CHDB
    raw = fields.extra.get("interface", ClickHouseInterface.HTTP.value)
    if isinstance(raw, str):
        try:
            return ClickHouseInterface(raw.strip().lower())
        except ValueError:
            pass
    allowed = ", ".join(i.value for i in ClickHouseInterface)
    raise ConnectionFormError(f"unsupported clickhouse interface (supported: {allowed})")


def _hostname(parts: SplitResult) -> str:
    """Airflow's ``_parse_netloc_to_hostname``: keep a path-like host (``%2Ftmp%2Fx.db``) case-intact."""
    hostname = unquote(parts.hostname or "")
    if "/" in hostname:
        hostname = parts.netloc
        if "@" in hostname:
            hostname = hostname.rsplit("@", 1)[1]
        if ":" in hostname:
            hostname = hostname.split(":", 1)[0]
        hostname = unquote(hostname)
    return hostname


def _json_object(text: str, *, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        # json's message carries a position, and the exception keeps the document: do not chain it.
        raise ConnectionFormError(f"{what} is not valid JSON") from None
    if not isinstance(data, dict):
        raise ConnectionFormError(f"{what} must be a JSON object")
    return data


def _optional_str(data: Mapping[str, Any], key: str, *, part: str = "field") -> str | None:
    """A text field (or extra, ``part="extra"``) of the connection; empty means not set."""
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConnectionFormError(f"the connection {part} {key!r} must be a string")
    return value


def _extra_str(extra: Mapping[str, Any], key: str) -> str | None:
    return _optional_str(extra, key, part="extra")


def _port(value: object) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ConnectionFormError("the connection port must be an integer")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise ConnectionFormError("the connection port must be an integer")
    if not 1 <= value <= 65535:
        raise ConnectionFormError("the connection port is out of range")
    return value


def _bool(value: object, *, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0", ""):
            return False
    raise ConnectionFormError(f"the connection extra {what!r} must be true or false")


def _safe_key(key: str) -> str:
    shown = key if key.isprintable() else repr(key)
    return shown if len(shown) <= 40 else shown[:40] + "..."
