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
    "_common": [
        "RetryPolicy", "env_flag", "fsync_dir", "json_text", "json_value", "otlp_protocol",
        "otlp_span_exporter", "service_resource", "traceparent_in", "traces_enabled",
        "turn_attributes", "write_private",
    ],
    "protocol": [
        "ACTION_TYPES", "Accepted", "Action", "AnswerInput", "Cancel", "Conflict",
        "CreateSession", "Intent", "IntentResult", "InvalidAction", "Rejected", "ReportDelivery",
        "RetryTurn",
        "SendMessage", "SequenceGap", "SessionState", "UnknownAction", "UpdateSession",
        "action_from_dict", "action_from_json", "action_id", "action_to_dict",
        "action_to_json", "copy_state", "envelope", "initial_state", "json_schemas", "new_id",
        "reduce", "replay", "state_from_json", "state_to_json", "timestamp",
    ],
    "runtime": [
        "EGRESS_PATH", "EgressRelay", "GATEWAY_PATH", "GatewayRoute", "SANDBOX_CHOICES",
        "Sandbox", "SandboxLimits", "choose_sandbox", "describe_sandbox",
        "AgentDefinition", "AgentLoop", "Answer", "ArtifactPort", "BlobsUnavailable",
        "CheckpointWrite",
        "Completed", "DerivedIds", "IdSource", "IncompatibleCheckpoint", "InputRequired",
        "Journal", "LedgerOp", "Limits", "McpServer", "ModelConfigError", "Outcome",
        "OwnershipLost", "RunEnv", "RuntimeEvent", "RuntimeFailure", "SandboxMode", "Stopped",
        "StoredCheckpoint", "SubAgentDefinition", "Suspended", "Tool", "ToolContext",
        "ToolError", "TraceScope", "Tracing", "agent_digest", "agent_from_plugin",
        "check_model", "context_of", "default_agent", "link_to", "model_from_env",
        "model_priced", "pinned_ids", "resolve_model",
        "sandbox_problem", "tool", "usage_cost", "UnknownCommand", "invoke_command",
        "AGENT_TOOL_NAMES", "client_tools",
    ],
    "runtime.testing": [
        "InMemoryJournal", "ScriptCall", "ScriptStep", "ScriptedModel", "SimulatedCrash",
        "call", "say",
    ],
    "host": [
        "DEFAULT_WORKSPACE_QUOTA",
        "Actor", "AutomatedRun", "CredentialRef", "DeploymentSpec", "EgressRule",
        "EgressRuleError", "ExecutionSnapshot", "is_public", "may_resolve", "parse_rules",
        "permitted",
        "Frame", "Hub", "RecordTrigger", "Refused", "Registry", "Scope", "SessionHost",
        "SessionStates",
        "execution_principal", "parse_traceparent", "random_ids", "remote_urls",
        "trace_parent", "problem_doc",
    ],
    "auth": [
        "DEFAULT_WORKSPACE", "GRANT_TTL", "LEGACY_ID", "NEEDS", "ROLES", "Authority", "Caller",
        "Denied", "Permission", "Role", "allows", "grant_problem", "may_assign",
    ],
    "store": [
        "ACTIVE_STATUSES", "MAX_SNAPSHOTS_DUE", "AnswerFacts", "ArtifactRecord", "AttemptRecord",
        "BlobCorrupted",
        "BlobRef",
        "BlobStore", "ChannelMove", "Checkpoint", "CheckpointPart", "Claimed", "CommitUnknown",
        "AuditKind", "AuditRecord", "DeliveryRecord", "DeploymentRecord", "Execution", "Fenced",
        "FencedTransaction", "FileBlobStore", "FireRecord", "GatewayFacts", "GrantFacts",
        "GrantRecord", "Handle", "HookRecord", "IdempotencyMismatch", "InFlight",
        "InputRequestRecord",
        "InvalidInput", "KeyCheck", "Lease", "LedgerEntry", "Lost", "MembershipRecord",
        "Mismatch", "ScheduleRecord", "SchedulerLease",
        "New", "NotFound", "Page", "PluginFile", "PluginVersion", "PrincipalRecord",
        "QuotaExceeded", "RefusalRecord", "Replay", "SchemaTooNew", "SealedSecret",
        "SessionBusy", "SessionFilter", "SessionRecord", "SessionSummary", "Snapshot", "Store",
        "StoreError", "TokenRecord", "Transaction",
        "Unavailable", "UsageRow", "Visibility", "Watcher", "Won", "WorkspaceRecord",
        "WriteConflict", "channel_target", "open_store", "snapshot_due",
        # The roles callers hold instead of the whole `Store`.
        "AuthStore", "AutomationStore", "ExecutionJournal", "FileStore", "GatewayStore",
        "InputStore", "LogStore", "RegistryStore", "SealedSecretStore", "SubscriptionStore",
        # Event subscriptions (docs/subscriptions.md).
        "BehindSession", "DeliveryState", "EventDelivery", "SubscriptionRecord",
    ],
    "supervisor": [
        "DEFAULT_RETENTION", "AttemptConfig", "AttemptRunner", "Collector", "StoreJournal",
        "Supervisor", "execution_dir",
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
    "protocols": [],
    "plugins": [
        "MAX_FILES", "MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "A2aAgentSpec", "AccessPolicy",
        "McpServerSpec",
        "Plugin", "PluginError", "PluginFile", "Problem", "Settings", "Severity", "Skill",
        "SubAgent", "builtin_plugin_root", "read_plugin", "scaffold_plugin",
        "HOOK_EVENTS", "Command", "Hook", "HookEvent", "find_command", "parse_invocation",
        "unknown_command",
        "CLAUDE_TOOL_NAMES", "MANIFEST", "MARKETPLACE", "MarketplaceEntry", "Transport",
        "claude_tool", "never_published", "read_marketplace", "tool_prefix", "unsupported_tool",
        "DEFAULT_ALIASES", "UndefinedVariable", "expand_variables", "model_of_alias",
        "undefined_variables", "unmapped_aliases",
    ],
    "gateway": [
        "A2A_PATH", "EGRESS_PATH", "PATH", "AuditLog", "Gateway", "Redactor", "issue_ticket",
    ],
    "automation": [
        "Automation", "AutomationError", "BadSignature", "CronError", "Delivered", "HookSpec",
        "Plan", "Run", "ScheduleSpec", "Scheduler", "Secrets", "TemplateError", "new_secret",
        "next_slot", "plan", "render", "sign", "slot_key", "verify",
        # Event subscriptions (docs/subscriptions.md).
        "SUBSCRIPTION_RETRY", "Deliverer", "Outbound", "RetryPolicy", "SubscriptionSpec",
        "Subscriptions", "event_id",
        # Rendered formats (A2A push notifications, docs/protocols.md).
        "RenderStep", "Renderer", "token_secret",
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
#: `_common` (private files, the retry policy, the OTEL_* rules) imports none and every
#: package may import it: `_everyone` adds it below.
MAY_IMPORT: dict[str, set[str]] = {
    "_common": set(),
    "protocol": set(),
    "plugins": set(),
    "runtime": {"protocol", "plugins"},
    "store": set(),
    "auth": {"protocol", "store"},
    "secrets": {"store"},
    "gateway": {"protocol", "store", "auth", "secrets", "host", "plugins"},
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
        "protocols",
    },
    "client": {"protocol"},
    "cli": {"protocol", "client", "server", "plugins", "bridge", "protocols"},
    "bridge": {"protocol", "client"},
    "protocols": {"protocol", "client"},
}
#: What every package but `_common` itself may import.
EVERYONE = {"_common"}

#: The cli reaches the server only to start it.
ONLY_FROM = {("cli", "server"): {"_serve.py"}}

#: Where a process is put together: the only modules that hold the whole `Store`. Every
#: other caller names the store role it needs (`LogStore`, `ExecutionJournal`, ...).
COMPOSITION_ROOTS = {"server/_serve.py", "server/_app.py", "server/_edge.py"}


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


def _documented_imports() -> dict[str, set[str]]:
    """The "may import" table of docs/architecture.md §9: every package named in a row's
    second cell, including one allowed only from a named module (in parentheses)."""
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## §9", 1)[1].split("\n## ", 1)[0]
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    rows = re.findall(r"^\| *(\w+) *\| *([^|]+?) *\|$", section, re.MULTILINE)
    return {
        package: set(re.findall(r"\w+", allowed)) & packages - {package}
        for package, allowed in rows
        if package != "package"
    }


def test_the_documented_map_is_the_enforced_one() -> None:
    """§9's table lists every package and every allowed arrow, no more and no fewer, and
    names the module each restricted arrow is allowed from."""
    assert _documented_imports() == MAY_IMPORT
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    for (package, _), modules in ONLY_FROM.items():
        for module in modules:
            assert f"`{package}/{module}`" in doc


def test_imports_point_one_way() -> None:
    wrong = []
    for package, path in _modules():
        if package not in MAY_IMPORT:
            continue
        for module, _, line in _cross_imports(package, path):
            target = module.split(".")[1]
            allowed = target in MAY_IMPORT[package] or (
                target in EVERYONE and package not in EVERYONE
            )
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
            parts = module.split(".")[1:]
            if parts[0] in EVERYONE:
                parts = parts[1:]  # private to opennua's users, a package to its packages
            if any(part.startswith("_") for part in parts):
                wrong.append(f"{where} imports private module {module}")
                continue
            exported = set(getattr(importlib.import_module(module), "__all__", ()))
            for name in names:
                if name not in exported and not _public_module(f"{module}.{name}"):
                    wrong.append(f"{where} imports {name} from {module} (not in its __all__)")
    assert not wrong, "\n".join(wrong)


def test_only_composition_roots_hold_the_whole_store() -> None:
    holders = sorted(
        str(path.relative_to(SRC))
        for package, path in _modules()
        if package != "store"
        for module, names, _ in _cross_imports(package, path)
        if module == "opennua.store" and "Store" in names
    )
    assert set(holders) <= COMPOSITION_ROOTS, holders


def test_the_store_imports_itself_without_a_cycle() -> None:
    """Each store module's imports of its siblings (type-only ones too) form no cycle: the
    core (`_sql`) imports no domain, a domain only those below it."""
    folder = SRC / "store"
    edges: dict[str, set[str]] = {}
    for path in folder.glob("_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = edges.setdefault(path.stem, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    found.add(node.module)
                else:
                    found.update(a.name for a in node.names)
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        if module in done:
            return
        for imported in sorted(edges.get(module, ())):
            visit(imported, (*path, module))
        done.add(module)

    for module in sorted(edges):
        visit(module, ())


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
