"""Endpoint descriptors: where a connection points, built from Airflow connections or env URIs."""

from __future__ import annotations

import math
import re
from enum import Enum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator

#: Longest accepted connect / receive timeout of an endpoint, in seconds (one day).
MAX_TIMEOUT_S = 86_400
#: TDS protocol versions pymssql (FreeTDS) accepts; 7.4 is SQL Server 2012 and newer.
TDS_VERSIONS = frozenset({"7.0", "7.1", "7.2", "7.3", "7.4"})
#: Default TDS version of the SQL Server connect path (``adapters/sources/mssql_connect``).
DEFAULT_TDS_VERSION = "7.4"
#: A ClickHouse setting name: lower-case identifier (``max_execution_time``), at most 100 characters.
SETTING_NAME = re.compile(r"[a-z][a-z0-9_]{0,99}")
#: Most session settings one endpoint may carry.
MAX_SESSION_SETTINGS = 64
#: Longest string value of a session setting.
MAX_SETTING_VALUE_CHARS = 256

SettingValue = bool | int | float | str


def _checked_settings(value: dict[str, SettingValue]) -> dict[str, SettingValue]:
    if len(value) > MAX_SESSION_SETTINGS:
        raise ValueError(f"at most {MAX_SESSION_SETTINGS} session settings")
    for name, item in value.items():
        if not SETTING_NAME.fullmatch(name):
            raise ValueError("a session setting name must be a lower-case identifier")
        if isinstance(item, str) and (len(item) > MAX_SETTING_VALUE_CHARS or not item.isprintable()):
            raise ValueError("a session setting value must be short printable text")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError("a session setting value must be a finite number")
    return value


SessionSettings = Annotated[dict[str, SettingValue], AfterValidator(_checked_settings)]


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

    ``path`` is used by file-backed endpoints (SQLite file, chDB directory), resolved (``path_per_place``:
    it was written relative to the manifest's folder, or under ``~``); ``interface`` only by
    ClickHouse (``http`` server or embedded ``chdb``). ``connect_timeout_s`` and ``receive_timeout_s``
    bound a ClickHouse server's TCP connect and each wait for its answer (None: the adapter's default).
    ``verify`` checks a ClickHouse server's TLS certificate (only with ``secure``); ``session_settings``
    are sent with every ClickHouse query. SQL Server: ``tds_version``, ``login_timeout_s`` (the connect)
    and ``query_timeout_s`` (pymssql's ``timeout``: each statement). None: the connect path's default.
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
    #: ``path`` was written relative (it hangs off the manifest's folder) or under ``~`` (the user's home):
    #: one connection then names a file per folder or per user, and a route records the file, not only the
    #: name (ADR 0079)
    path_per_place: bool = False
    connect_timeout_s: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_S)
    receive_timeout_s: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_S)
    verify: bool = True
    session_settings: SessionSettings = Field(default_factory=dict)
    tds_version: str | None = None
    login_timeout_s: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_S)
    query_timeout_s: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_S)

    @field_validator("tds_version")
    @classmethod
    def _known_tds_version(cls, value: str | None) -> str | None:
        if value is not None and value not in TDS_VERSIONS:
            raise ValueError("tds_version must be one of " + ", ".join(sorted(TDS_VERSIONS)))
        return value

    def secret(self) -> str | None:
        return self.password.get_secret_value() if self.password is not None else None

    def describe(self) -> str:
        """Safe one-line description: kind and name only (no host paths that might be secret)."""
        if self.interface is not None:
            return f"{self.kind.value}/{self.interface.value} connection {self.name!r}"
        return f"{self.kind.value} connection {self.name!r}"
