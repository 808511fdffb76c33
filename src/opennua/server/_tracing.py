"""OpenTelemetry for `nua serve`: providers from the standard `OTEL_*` environment variables,
and the W3C `traceparent` of every POST handed to the Host.

Traces are off unless an OTLP endpoint or `OTEL_TRACES_EXPORTER` is set (docs/observability.md);
off, no span is made and the runtime's model is not wrapped for spans. The GenAI
histograms (token usage, operation duration) always reach `/metrics`, and OTLP too when
traces are exported. Prompt and completion content is recorded only with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp, Receive, Scope, Send

from opennua._common import (
    env_flag,
    otlp_protocol,
    otlp_span_exporter,
    service_resource,
    traces_enabled,
)
from opennua.host import parse_traceparent, trace_parent

if TYPE_CHECKING:
    from opennua.runtime import Tracing

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class _PinnableIds(RandomIdGenerator):
    """Random ids, except the turn span's, which the Host fixed at acceptance."""

    def __init__(self) -> None:
        # Imported when traces are on: the runtime is not loaded before HTTP answers.
        from opennua.runtime import pinned_ids

        self._pinned = pinned_ids

    def generate_span_id(self) -> int:
        pinned = self._pinned.get()
        return pinned[1] if pinned is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        pinned = self._pinned.get()
        return pinned[0] if pinned is not None else super().generate_trace_id()


@dataclass
class Telemetry:
    """What `nua serve` hands its supervisor; `shutdown()` flushes what is queued."""

    tracer_provider: TracerProvider | None
    meter_provider: MeterProvider
    include_content: bool

    @functools.cached_property
    def tracing(self) -> Tracing:
        """The runtime's view of these providers, made when the supervisor first needs
        it (the runtime is imported after `nua serve` answers HTTP)."""
        from opennua.runtime import Tracing

        return Tracing(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            include_content=self.include_content,
        )

    def shutdown(self) -> None:
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _metric_exporter(env: Mapping[str, str]) -> Any:
    if otlp_protocol(env, "METRICS") == "grpc":
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

    resource = service_resource(env, "opennua")
    readers: list[MetricReader] = [PrometheusMetricReader(registry=registry)]
    tracer_provider: TracerProvider | None = None
    if traces_enabled(env):
        tracer_provider = TracerProvider(resource=resource, id_generator=_PinnableIds())
        processor: SpanProcessor = BatchSpanProcessor(otlp_span_exporter(env))
        tracer_provider.add_span_processor(processor)
        if env.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() != "none":
            readers.append(PeriodicExportingMetricReader(_metric_exporter(env)))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    content = env_flag(env, CONTENT_ENV)
    return Telemetry(tracer_provider, meter_provider, content)


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
