"""A real OTLP/HTTP receiver for tests: it takes what an exporter POSTs to `/v1/traces`
and `/v1/metrics` (protobuf), decodes it with `opentelemetry-proto` and keeps the spans."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value_of(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    links: list[str]
    start_ns: int
    end_ns: int


@dataclass
class Receiver:
    spans: list[Span] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    #: Every export request's body as received (decompressed): what a backend stores.
    raw: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver.lock:
                    receiver.raw.append(body)
                if self.path == "/v1/traces":
                    receiver._traces(body)
                elif self.path == "/v1/metrics":
                    receiver._metrics(body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = [
            Span(
                name=s.name,
                trace_id=s.trace_id.hex(),
                span_id=s.span_id.hex(),
                parent_span_id=s.parent_span_id.hex(),
                attributes={a.key: value_of(a.value) for a in s.attributes},
                links=[link.span_id.hex() for link in s.links],
                start_ns=s.start_time_unix_nano,
                end_ns=s.end_time_unix_nano,
            )
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]
        with self.lock:
            self.spans.extend(spans)

    def _metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        names = {
            m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
        }
        with self.lock:
            self.metric_names |= names

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """What `nua serve` needs to export here, quickly (tests wait for the spans)."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
        }

    def snapshot(self) -> list[Span]:
        with self.lock:
            return list(self.spans)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
