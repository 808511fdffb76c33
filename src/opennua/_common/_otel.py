"""The standard `OTEL_*` environment rules every opennua process follows
(docs/observability.md): when traces are on, and the OTLP exporter they say; and what
every span of a turn carries, whichever process makes it.

The OpenTelemetry SDK is imported where it is used: a process with traces off never loads
it, and importing this package stays free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.util.types import AttributeValue

_TRUE = frozenset({"1", "true", "yes", "on"})


def env_flag(env: Mapping[str, str], name: str) -> bool:
    """A boolean `OTEL_*` variable: set to 1, true, yes or on (any case)."""
    return env.get(name, "").strip().lower() in _TRUE


def traces_enabled(env: Mapping[str, str]) -> bool:
    """Off unless an OTLP endpoint or `OTEL_TRACES_EXPORTER` is set (and the SDK is not
    disabled)."""
    if env_flag(env, "OTEL_SDK_DISABLED"):
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def otlp_protocol(env: Mapping[str, str], signal: str) -> str:
    """The OTLP protocol for `signal` (`TRACES`, `METRICS`): its own variable, else the
    general one, else `http/protobuf`."""
    return (
        env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", env.get("OTEL_EXPORTER_OTLP_PROTOCOL", ""))
        .strip()
        .lower()
        or "http/protobuf"
    )


def otlp_span_exporter(env: Mapping[str, str]) -> Any:
    """The OTLP span exporter `env` names; it reads its endpoint, headers and TLS settings
    from the process environment itself. Imported only when used: the exporters pull in
    protobuf (and gRPC)."""
    if otlp_protocol(env, "TRACES") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter()


def service_resource(env: Mapping[str, str], service_name: str) -> Resource:
    """The resource of this process: `service_name` unless `OTEL_SERVICE_NAME` names one
    (the SDK reads that and `OTEL_RESOURCE_ATTRIBUTES` itself)."""
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": service_name} if "OTEL_SERVICE_NAME" not in env else {})


class Turn(Protocol):
    """What names a turn on its spans (the store's `Execution` has it)."""

    @property
    def session_id(self) -> str: ...
    @property
    def turn_id(self) -> str: ...
    @property
    def execution_id(self) -> str: ...
    @property
    def trigger(self) -> Any: ...


def turn_attributes(turn: Turn) -> dict[str, AttributeValue]:
    """The attributes every span of a turn carries, whichever process makes it (the
    supervisor's attempt and turn spans, the gateway's call spans)."""
    trigger = turn.trigger if isinstance(turn.trigger, dict) else {}
    return {
        "opennua.session_id": turn.session_id,
        "opennua.turn_id": turn.turn_id,
        "opennua.execution_id": turn.execution_id,
        "opennua.client_id": str(trigger.get("client_id") or ""),
    }


def traceparent_in(trace_context: object) -> str | None:
    """The W3C `traceparent` of the turn's span in an execution's stored `trace_context`;
    None when it was accepted without one."""
    value = trace_context.get("traceparent") if isinstance(trace_context, dict) else None
    return value if isinstance(value, str) else None
