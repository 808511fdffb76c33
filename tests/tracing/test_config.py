"""`nua serve`'s telemetry from the standard OTEL_* variables: off unless asked, gRPC as
well as HTTP/protobuf, content capture only when enabled."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from prometheus_client import CollectorRegistry

from opennua.server._tracing import telemetry_from_env, traces_enabled
from tests.e2e._proc import free_port


@pytest.mark.parametrize(
    ("env", "enabled"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "nua"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
    ],
)
def test_traces_are_off_unless_an_exporter_is_configured(
    env: dict[str, str], enabled: bool
) -> None:
    assert traces_enabled(env) is enabled
    telemetry = telemetry_from_env(env, CollectorRegistry())
    try:
        assert (telemetry.tracer_provider is not None) is enabled
        assert (telemetry.tracing.tracer_provider is not None) is enabled
        assert telemetry.tracing.include_content is False
    finally:
        telemetry.shutdown()


def test_content_capture_is_its_own_switch() -> None:
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    telemetry = telemetry_from_env(env, CollectorRegistry())
    telemetry.shutdown()
    assert telemetry.tracing.include_content is True


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.names: list[str] = []
        self.arrived = threading.Event()

    def Export(self, request: Any, context: Any) -> Any:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                self.names.extend(s.name for s in ss.spans)
        self.arrived.set()
        return trace_service_pb2.ExportTraceServiceResponse()


def test_otlp_grpc_export_reaches_a_real_grpc_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    collector = _Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = free_port()
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_METRICS_EXPORTER": "none",
    }
    for name, value in env.items():  # the exporter reads its settings itself, as OTel's do
        monkeypatch.setenv(name, value)
    try:
        telemetry = telemetry_from_env(env, CollectorRegistry())
        with telemetry.tracing.tracer.start_as_current_span("invoke_agent default"):
            time.sleep(0)
        telemetry.shutdown()  # flushes
        assert collector.arrived.wait(10)
        assert collector.names == ["invoke_agent default"]
    finally:
        server.stop(0)
