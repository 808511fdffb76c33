"""The Session Host: client-visible facts, ordered per session."""

from opennua.host._hub import Frame, Hub
from opennua.host._inputs import Actor, AutomatedRun, RecordTrigger, random_ids, rfc3339
from opennua.host._registry import (
    CredentialRef,
    DeploymentSpec,
    ExecutionSnapshot,
    Refused,
    Registry,
    Scope,
    execution_principal,
    remote_urls,
)
from opennua.host._service import SessionHost
from opennua.host._tracing import parse_traceparent, trace_parent

__all__ = [
    "Actor",
    "AutomatedRun",
    "CredentialRef",
    "DeploymentSpec",
    "ExecutionSnapshot",
    "Frame",
    "Hub",
    "RecordTrigger",
    "Refused",
    "Registry",
    "Scope",
    "SessionHost",
    "execution_principal",
    "parse_traceparent",
    "random_ids",
    "remote_urls",
    "rfc3339",
    "trace_parent",
]
