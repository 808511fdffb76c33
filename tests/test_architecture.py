"""The shape of the code (docs/architecture.md): each package's public names, the direction
of imports between packages, and that a package is reached only through its public API.

One table per rule, so a change to the architecture is a change to this file.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import opennua

SRC = Path(opennua.__file__).parent

#: Every package's `__all__`. A new public name is a decision: add it here.
PUBLIC: dict[str, list[str]] = {
    "protocol": [
        "ACTION_TYPES", "Accepted", "Action", "AnswerInput", "Cancel", "Conflict",
        "CreateSession", "Intent", "IntentResult", "InvalidAction", "Rejected", "ReportDelivery",
        "RetryTurn",
        "SendMessage", "SequenceGap", "SessionState", "UnknownAction", "UpdateSession",
        "action_from_dict", "action_from_json", "action_id", "action_to_dict",
        "action_to_json", "copy_state", "initial_state", "json_schemas", "new_id", "reduce",
        "replay", "state_from_json", "state_to_json",
    ],
    "runtime": [
        "GATEWAY_PATH", "GatewayRoute",
        "AgentDefinition", "AgentLoop", "Answer", "ArtifactPort", "BlobsUnavailable",
        "CheckpointRecord",
        "Completed", "DerivedIds", "IdSource", "IncompatibleCheckpoint", "InputRequired",
        "Journal", "LedgerOp", "Limits", "McpServer", "ModelConfigError", "Outcome",
        "OwnershipLost", "RunEnv", "RuntimeEvent", "RuntimeFailure", "SandboxMode", "Stopped",
        "StoredCheckpoint", "SubAgentDefinition", "Suspended", "Tool", "ToolContext",
        "ToolError", "TraceScope", "Tracing", "agent_digest", "agent_from_plugin",
        "context_of", "default_agent", "link_to", "pinned_ids", "resolve_model",
        "sandbox_problem", "tool", "usage_cost",
    ],
    "runtime.testing": [
        "InMemoryJournal", "ScriptCall", "ScriptStep", "ScriptedModel", "SimulatedCrash",
        "call", "say",
    ],
    "host": [
        "Actor", "AutomatedRun", "CredentialRef", "DeploymentSpec", "ExecutionSnapshot",
        "Frame", "Hub", "RecordTrigger", "Refused", "Registry", "Scope", "SessionHost",
        "execution_principal", "parse_traceparent", "random_ids", "remote_urls", "rfc3339",
        "trace_parent",
    ],
    "auth": [
        "DEFAULT_WORKSPACE", "GRANT_TTL", "LEGACY_ID", "NEEDS", "ROLES", "Authority", "Caller",
        "Denied", "Permission", "Role", "allows", "grant_problem", "may_assign",
    ],
    "store": [
        "MAX_SNAPSHOTS_DUE", "AnswerFacts", "ArtifactRecord", "AttemptRecord", "BlobCorrupted",
        "BlobRef",
        "BlobStore", "ChannelMove", "Checkpoint", "CheckpointPart", "Claimed", "CommitUnknown",
        "AuditRecord", "DeliveryRecord", "DeploymentRecord", "Execution", "Fenced",
        "FencedTransaction", "FileBlobStore", "FireRecord", "GatewayFacts", "GrantFacts",
        "GrantRecord", "Handle", "HookRecord", "IdempotencyMismatch", "InFlight",
        "InputRequestRecord",
        "InvalidInput", "KeyCheck", "Lease", "LedgerEntry", "Lost", "MembershipRecord",
        "Mismatch", "ScheduleRecord", "SchedulerLease",
        "New", "NotFound", "Page", "PluginFile", "PluginVersion", "PrincipalRecord",
        "Replay", "SchemaTooNew", "SealedSecret", "SessionBusy", "SessionRecord",
        "SessionSummary", "Snapshot", "Store", "StoreError", "TokenRecord", "Transaction",
        "Unavailable", "UsageRow", "Visibility", "Watcher", "Won", "WorkspaceRecord",
        "WriteConflict", "channel_target", "open_store", "snapshot_due",
    ],
    "supervisor": [
        "DEFAULT_RETENTION", "AttemptConfig", "AttemptRunner", "Collector", "StoreJournal",
        "Supervisor", "execution_workspace",
    ],
    "server": ["CODES", "Metrics", "ServeConfig", "create_app", "rotate_secret_key", "serve"],
    "client": [
        "ActionEvent", "ApiError", "Backoff", "Client", "ClientError", "ConflictError",
        "ConnectionEvent", "DEFAULT_URL", "Event", "GoneError", "IntegrityError",
        "InvalidRequestError", "LocalSession", "NotFoundError", "PendingMessage",
        "ResyncEvent", "RolledBack", "ServerError", "SessionClient", "SessionPage",
        "Subscription", "UnauthorizedError", "UnreachableError", "connect", "new_client_id",
        "new_intent_id",
    ],
    "cli": ["app", "main"],
    "plugins": [
        "MAX_FILES", "MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "AccessPolicy", "McpServerSpec",
        "Plugin", "PluginError", "PluginFile", "Settings", "Skill", "SubAgent",
        "builtin_plugin_root", "read_plugin", "scaffold_plugin",
    ],
    "gateway": ["PATH", "AuditLog", "Gateway", "Redactor", "issue_ticket"],
    "automation": [
        "Automation", "AutomationError", "BadSignature", "CronError", "HookSpec", "Plan", "Run",
        "ScheduleSpec", "Scheduler", "Secrets", "TemplateError", "new_secret", "next_slot",
        "plan", "render", "sign", "slot_key", "verify",
    ],
    "secrets": [
        "KEY_ENV", "KEY_FILE", "MAX_VALUE_BYTES", "NAME_PATTERN", "SecretError", "SecretInfo",
        "SecretKey", "SecretKeyError", "SecretStore", "decode_key", "load_key",
        "open_secret_store", "rotate_key",
    ],
    "bridge": [
        "BridgeConfig", "Homeserver", "MatrixBridge", "RetryPolicy", "delivery_id",
        "tracer_provider_from_env",
    ],
}  # fmt: skip

#: Which packages each package may import (docs/architecture.md, "Imports point one way").
MAY_IMPORT: dict[str, set[str]] = {
    "protocol": set(),
    "plugins": set(),
    "runtime": {"protocol", "plugins"},
    "store": set(),
    "auth": {"store"},
    "secrets": {"store"},
    "gateway": {"store", "auth", "secrets", "host", "plugins"},
    "host": {"protocol", "store", "plugins"},
    "supervisor": {"protocol", "runtime", "store", "plugins"},
    "automation": {"protocol", "store", "auth", "host"},
    "server": {
        "protocol",
        "runtime",
        "store",
        "auth",
        "host",
        "supervisor",
        "plugins",
        "automation",
        "secrets",
        "gateway",
    },
    "client": {"protocol"},
    "cli": {"protocol", "client", "server", "plugins", "bridge"},
    "bridge": {"protocol", "client"},
}

#: The cli reaches the server only to start it.
ONLY_FROM = {("cli", "server"): {"_serve.py"}}


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).parts
        if len(parts) > 1:
            out.append((parts[0], path))
    return out


def _cross_imports(package: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(module, names, line) of every import from another opennua package."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, [a.name for a in node.names])]
        elif isinstance(node, ast.Import):
            modules = [(a.name, []) for a in node.names]
        else:
            continue
        for module, names in modules:
            parts = module.split(".")
            if parts[0] == "opennua" and len(parts) > 1 and parts[1] != package:
                found.append((module, names, node.lineno))
    return found


def _public_module(name: str) -> bool:
    """A submodule with no private part and its own `__all__` is public (`protocol.actions`)."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return False
    return hasattr(module, "__all__") and not any(p.startswith("_") for p in name.split("."))


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_public_names_are_pinned(package: str) -> None:
    module = importlib.import_module(f"opennua.{package}")
    assert sorted(module.__all__) == sorted(PUBLIC[package])
    for name in module.__all__:
        assert hasattr(module, name), name


def test_every_package_is_in_the_import_table() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert packages - {"web"} == set(MAY_IMPORT)


def test_imports_point_one_way() -> None:
    wrong = []
    for package, path in _modules():
        if package not in MAY_IMPORT:
            continue
        for module, _, line in _cross_imports(package, path):
            target = module.split(".")[1]
            allowed = target in MAY_IMPORT[package]
            only = ONLY_FROM.get((package, target))
            if not allowed or (only is not None and path.name not in only):
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_other_packages_are_reached_only_through_their_public_api() -> None:
    """`from opennua.<pkg> import name` (or a public submodule's `__all__`), never `_private`."""
    wrong = []
    for package, path in _modules():
        for module, names, line in _cross_imports(package, path):
            where = f"{path.relative_to(SRC)}:{line}"
            if any(part.startswith("_") for part in module.split(".")):
                wrong.append(f"{where} imports private module {module}")
                continue
            exported = set(getattr(importlib.import_module(module), "__all__", ()))
            for name in names:
                if name not in exported and not _public_module(f"{module}.{name}"):
                    wrong.append(f"{where} imports {name} from {module} (not in its __all__)")
    assert not wrong, "\n".join(wrong)


def test_the_design_is_cited_from_the_repository() -> None:
    """A person cloning the project has docs/architecture.md, not the design notes it was
    written from: no source, test or doc cites those."""
    root = SRC.parents[1]
    outside = re.compile(r"\b(DESIGN|STYLE)\.md\b")
    citing = [
        str(path.relative_to(root))
        for folder in ("src", "tests", "docs", "benchmarks")
        for path in (root / folder).rglob("*")
        if path.suffix in {".py", ".js", ".md", ".html", ".css"}
        and path.name != "architecture.md"
        and outside.search(path.read_text("utf-8", errors="replace"))
    ]
    assert citing == [], citing
