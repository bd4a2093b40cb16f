"""Endpoint descriptors: where a connection points, built from Airflow connections or env URIs."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, SecretStr


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
    ClickHouse (``http`` server or embedded ``chdb``).
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

    def secret(self) -> str | None:
        return self.password.get_secret_value() if self.password is not None else None

    def describe(self) -> str:
        """Safe one-line description: kind and name only (no host paths that might be secret)."""
        if self.interface is not None:
            return f"{self.kind.value}/{self.interface.value} connection {self.name!r}"
        return f"{self.kind.value} connection {self.name!r}"
