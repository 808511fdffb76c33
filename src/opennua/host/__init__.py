"""The Session Host: client-visible facts, ordered per session."""

from opennua.host._egress import (
    EgressRule,
    EgressRuleError,
    is_public,
    may_resolve,
    parse_rules,
    permitted,
)
from opennua.host._hub import Frame, Hub
from opennua.host._inputs import Actor, AutomatedRun, RecordTrigger, random_ids
from opennua.host._plugin_files import DEFAULT_WORKSPACE_QUOTA
from opennua.host._refused import Refused
from opennua.host._registry import (
    CredentialRef,
    DeploymentSpec,
    ExecutionSnapshot,
    Registry,
    Scope,
    execution_principal,
    problem_doc,
    remote_urls,
)
from opennua.host._service import SessionHost
from opennua.host._states import SessionStates
from opennua.host._tracing import parse_traceparent, trace_parent

__all__ = [
    "DEFAULT_WORKSPACE_QUOTA",
    "Actor",
    "AutomatedRun",
    "CredentialRef",
    "DeploymentSpec",
    "EgressRule",
    "EgressRuleError",
    "ExecutionSnapshot",
    "Frame",
    "Hub",
    "RecordTrigger",
    "Refused",
    "Registry",
    "Scope",
    "SessionHost",
    "SessionStates",
    "execution_principal",
    "is_public",
    "may_resolve",
    "parse_rules",
    "parse_traceparent",
    "permitted",
    "problem_doc",
    "random_ids",
    "remote_urls",
    "trace_parent",
]
