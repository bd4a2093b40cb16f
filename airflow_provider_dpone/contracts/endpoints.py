"""Endpoint descriptors: where a connection points, built from Airflow connections or env URIs."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, SecretStr

#: Longest accepted connect / receive timeout of an endpoint, in seconds (one day).
MAX_TIMEOUT_S = 86_400
#: Connection extras (clickhouse-connect's own names, in seconds) -> descriptor fields.
CLICKHOUSE_TIMEOUT_EXTRAS: Mapping[str, str] = {
    "connect_timeout": "connect_timeout_s",
    "send_receive_timeout": "receive_timeout_s",
}


def clickhouse_timeouts_from_extra(extra: Mapping[str, object]) -> dict[str, int]:
    """Descriptor fields for the timeout extras present in ``extra``; ``ValueError`` with a safe reason.

    A value is a whole number of seconds from 1 to :data:`MAX_TIMEOUT_S`, as a number or a digit string
    (URI query parameters are strings).
    """
    fields: dict[str, int] = {}
    for key, field_name in CLICKHOUSE_TIMEOUT_EXTRAS.items():
        raw = extra.get(key)
        if raw is None or raw == "":
            continue
        value: object = raw.strip() if isinstance(raw, str) else raw
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TIMEOUT_S:
            raise ValueError(
                f"the connection extra {key!r} must be a whole number of seconds from 1 to {MAX_TIMEOUT_S}"
            )
        fields[field_name] = value
    return fields


class EndpointKind(str, Enum):
    MSSQL = "mssql"
    SQLITE = "sqlite"
    POSTGRES = "postgres"
    CLICKHOUSE = "clickhouse"


class ClickHouseInterface(str, Enum):
    HTTP = "http"
    CHDB = "chdb"


class EndpointDescriptor(BaseModel):
    """One admitted endpoint. ``password`` is a SecretStr: repr and JSON dumps never show it.

    ``path`` is used by file-backed endpoints (SQLite file, chDB directory); ``interface`` only by
    ClickHouse (``http`` server or embedded ``chdb``). ``connect_timeout_s`` and ``receive_timeout_s``
    bound a ClickHouse server's TCP connect and each wait for its answer (None: the adapter's default).
    """

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="connection name the manifest used")
    kind: EndpointKind
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    database: str | None = None
    user: str | None = None
    password: SecretStr | None = Field(default=None, repr=False)
    secure: bool = False
    interface: ClickHouseInterface | None = None
    path: str | None = None
    connect_timeout_s: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_S)
    receive_timeout_s: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_S)

    def secret(self) -> str | None:
        return self.password.get_secret_value() if self.password is not None else None

    def describe(self) -> str:
        """Safe one-line description: kind and name only (no host paths that might be secret)."""
        if self.interface is not None:
            return f"{self.kind.value}/{self.interface.value} connection {self.name!r}"
        return f"{self.kind.value} connection {self.name!r}"
