"""What every package may use and that belongs to none of them: writing a private file
durably, fast JSON (text and values), one retry policy, the OpenTelemetry environment rules and a
turn's span attributes.

Imports nothing of opennua (tests/test_architecture.py), so any package may import it.
"""

from opennua._common._files import fsync_dir, write_private
from opennua._common._json import json_text, json_value
from opennua._common._otel import (
    env_flag,
    otlp_protocol,
    otlp_span_exporter,
    service_resource,
    traceparent_in,
    traces_enabled,
    turn_attributes,
)
from opennua._common._retry import RetryPolicy

__all__ = [
    "RetryPolicy",
    "env_flag",
    "fsync_dir",
    "json_text",
    "json_value",
    "otlp_protocol",
    "otlp_span_exporter",
    "service_resource",
    "traceparent_in",
    "traces_enabled",
    "turn_attributes",
    "write_private",
]
