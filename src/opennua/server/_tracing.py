"""OpenTelemetry for `nua serve`: providers from the standard `OTEL_*` environment variables,
and the W3C `traceparent` of every POST handed to the Host.

Traces are off unless an OTLP endpoint or `OTEL_TRACES_EXPORTER` is set (docs/observability.md);
off, no span is made and the runtime's model is not wrapped for spans. The GenAI
histograms (token usage, operation duration) always reach `/metrics`, and OTLP too when
traces are exported. Prompt and completion content is recorded only with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp, Receive, Scope, Send

from opennua.host import parse_traceparent, trace_parent
from opennua.runtime import Tracing, pinned_ids

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_TRUE = {"1", "true", "yes", "on"}


class _PinnableIds(RandomIdGenerator):
    """Random ids, except the turn span's, which the Host fixed at acceptance."""

    def generate_span_id(self) -> int:
        pinned = pinned_ids.get()
        return pinned[1] if pinned is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        pinned = pinned_ids.get()
        return pinned[0] if pinned is not None else super().generate_trace_id()


@dataclass
class Telemetry:
    """What `nua serve` hands its supervisor; `shutdown()` flushes what is queued."""

    tracing: Tracing
    tracer_provider: TracerProvider | None
    meter_provider: MeterProvider

    def shutdown(self) -> None:
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def traces_enabled(env: Mapping[str, str]) -> bool:
    if env.get("OTEL_SDK_DISABLED", "").lower() in _TRUE:
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _protocol(env: Mapping[str, str], signal: str) -> str:
    return (
        env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", env.get("OTEL_EXPORTER_OTLP_PROTOCOL", ""))
        .strip()
        .lower()
        or "http/protobuf"
    )


def _span_exporter(env: Mapping[str, str]) -> Any:
    # Imported only when used: the exporters pull in protobuf (and gRPC).
    if _protocol(env, "TRACES") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter()


def _metric_exporter(env: Mapping[str, str]) -> Any:
    if _protocol(env, "METRICS") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    return HttpMetricExporter()


def telemetry_from_env(env: Mapping[str, str], registry: CollectorRegistry) -> Telemetry:
    """Providers as the `OTEL_*` variables in `env` say (the process environment: the
    exporters read their endpoint, headers and TLS settings from it themselves); the GenAI
    metrics also go to `registry`."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    defaults = {"service.name": "opennua"}
    resource = Resource.create(defaults if "OTEL_SERVICE_NAME" not in env else {})
    readers: list[MetricReader] = [PrometheusMetricReader(registry=registry)]
    tracer_provider: TracerProvider | None = None
    if traces_enabled(env):
        tracer_provider = TracerProvider(resource=resource, id_generator=_PinnableIds())
        processor: SpanProcessor = BatchSpanProcessor(_span_exporter(env))
        tracer_provider.add_span_processor(processor)
        if env.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() != "none":
            readers.append(PeriodicExportingMetricReader(_metric_exporter(env)))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    tracing = Tracing(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        include_content=env.get(CONTENT_ENV, "").strip().lower() in _TRUE,
    )
    return Telemetry(tracing, tracer_provider, meter_provider)


class TraceParent:
    """ASGI middleware: a valid `traceparent` on a POST becomes the Host's `trace_parent`
    for that request, so a turn it starts joins the caller's trace (an invalid one is
    ignored, as W3C Trace Context says)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        value = next((v for k, v in scope["headers"] if k == b"traceparent"), None)
        parsed = parse_traceparent(value.decode("latin-1")) if value else None
        token = trace_parent.set("00-{}-{}-{}".format(*parsed) if parsed else None)
        try:
            await self.app(scope, receive, send)
        finally:
            trace_parent.reset(token)
