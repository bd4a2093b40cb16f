"""The parent-to-worker request frame and the worker-to-parent probe frame.

The request carries the endpoint descriptor with its password, so it travels only through the child's
stdin pipe: never argv, never the environment, never a file. It is one canonical JSON line. The answer
frame (``ReaderResponseFrame``) is a contract because its worst-case size is reserved in the capsule.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from airflow_provider_dpone.contracts.capsule import canonical_bytes, parse_model
from airflow_provider_dpone.contracts.endpoints import (
    ClickHouseInterface,
    EndpointDescriptor,
    EndpointKind,
    SessionSettings,
)
from airflow_provider_dpone.contracts.target_observation import NONCE_PATTERN, TargetReadRequest

_STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")

#: Largest request frame (newline included) a worker reads from its stdin.
REQUEST_FRAME_MAX_BYTES = 1_048_576
#: The probe answer is tiny; anything longer is refused.
PROBE_FRAME_MAX_BYTES = 512


def new_nonce() -> str:
    return secrets.token_hex(32)


def measuring_settings(settings: Mapping[str, object]) -> dict[str, Any]:
    """The connection's session settings as the reader applies them: every ``*_overflow_mode`` it names is
    ``throw``. With ``break`` a limit ends the measuring SELECT early without an error; the sink's writing
    clients override the mode the same way, so a connection may carry it for its hook reads. (The worker
    still reads every mode back: a profile's ``break`` is refused, ``limits_may_cut_reads``.)"""
    return {
        name: "throw" if name.endswith(("_overflow_mode", "_overflow_mode_leaf")) else value
        for name, value in settings.items()
    }


class EndpointFrame(BaseModel):
    """The admitted endpoint as the worker needs it. ``password`` is plain here (``repr=False``): the frame
    exists only as bytes in a pipe and as a short-lived object in parent and worker. ``verify`` and
    ``session_settings`` travel too: without them a ``verify: false`` server (a self-signed certificate)
    refused every observation, and the connection's settings never reached the measuring SELECT."""

    model_config = _STRICT

    name: str = Field(min_length=1)
    interface: ClickHouseInterface
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    database: str | None = None
    user: str | None = None
    password: str | None = Field(default=None, repr=False)
    secure: bool = False
    verify: bool = True
    session_settings: SessionSettings = Field(default_factory=dict)
    path: str | None = None
    #: the HTTP proxy the parent's environment names for the server (``*_proxy``, ``no_proxy``), resolved
    #: there as the sink resolves it, so the worker reads the server the load wrote (credentials may be in
    #: it: ``repr=False``, and never in the worker's environment)
    proxy: str | None = Field(default=None, repr=False)

    @classmethod
    def of(
        cls, endpoint: EndpointDescriptor, *, resolved_path: str | None, proxy: str | None = None
    ) -> EndpointFrame:
        assert endpoint.interface is not None
        return cls(
            name=endpoint.name,
            interface=endpoint.interface,
            host=endpoint.host,
            port=endpoint.port,
            database=endpoint.database,
            user=endpoint.user,
            password=endpoint.secret(),
            secure=endpoint.secure,
            verify=endpoint.verify,
            session_settings=measuring_settings(endpoint.session_settings),
            path=resolved_path,
            proxy=proxy,
        )

    def descriptor(self) -> EndpointDescriptor:
        return EndpointDescriptor(
            name=self.name,
            kind=EndpointKind.CLICKHOUSE,
            interface=self.interface,
            host=self.host,
            port=self.port,
            database=self.database,
            user=self.user,
            password=SecretStr(self.password) if self.password is not None else None,
            secure=self.secure,
            verify=self.verify,
            session_settings=dict(self.session_settings),
            path=self.path,
        )


class WorkerRequestFrame(BaseModel):
    model_config = _STRICT

    schema_version: Literal["dpone.target_reader.request.v1"] = "dpone.target_reader.request.v1"
    mode: Literal["observe", "probe"]
    nonce: str = Field(pattern=NONCE_PATTERN)
    budget_ms: int = Field(ge=1, le=3_600_000)
    endpoint: EndpointFrame | None = None
    request: TargetReadRequest | None = None

    def encode(self) -> bytes:
        return canonical_bytes(self) + b"\n"

    @classmethod
    def decode(cls, line: bytes) -> WorkerRequestFrame:
        frame = parse_model(cls, line.rstrip(b"\n"), max_bytes=REQUEST_FRAME_MAX_BYTES)
        if frame.mode == "observe" and (frame.endpoint is None or frame.request is None):
            raise ValueError("an observe frame needs an endpoint and a request")
        return frame


class ProbeReadyFrame(BaseModel):
    """A probe worker's only answer: it started, read its frame and echoes the nonce."""

    model_config = _STRICT

    schema_version: Literal["dpone.target_reader.probe.v1"] = "dpone.target_reader.probe.v1"
    nonce: str = Field(pattern=NONCE_PATTERN)
    status: Literal["ready"] = "ready"
