"""The client's public surface, and the rule that it depends on nothing but the protocol."""

from __future__ import annotations

import ast
from pathlib import Path

import opennua.client

EXPORTED = {
    "DEFAULT_URL",
    "ActionEvent",
    "ApiError",
    "Backoff",
    "Client",
    "ClientError",
    "ConflictError",
    "ConnectionEvent",
    "Event",
    "GoneError",
    "IntegrityError",
    "InvalidRequestError",
    "LocalSession",
    "NotFoundError",
    "PendingMessage",
    "ResyncEvent",
    "RolledBack",
    "ServerError",
    "SessionClient",
    "SessionPage",
    "Subscription",
    "UnauthorizedError",
    "UnreachableError",
    "connect",
    "new_client_id",
    "new_intent_id",
}


def test_exported_names_are_pinned() -> None:
    assert set(opennua.client.__all__) == EXPORTED
    for name in EXPORTED:
        assert hasattr(opennua.client, name), name


def _opennua_imports(package: Path) -> set[str]:
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("opennua")}


def test_the_client_imports_only_the_protocol() -> None:
    root = Path(opennua.client.__file__).parent
    imported = _opennua_imports(root)
    assert imported and all(
        name.startswith(("opennua.protocol", "opennua.client")) for name in imported
    ), imported


def test_the_cli_reaches_the_server_only_from_nua_serve() -> None:
    root = Path(opennua.client.__file__).parent.parent / "cli"
    for path in root.rglob("*.py"):
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module)
        allowed = ("opennua.protocol", "opennua.client", "opennua.cli")
        outside = {n for n in imported if n.startswith("opennua") and not n.startswith(allowed)}
        if path.name == "_serve.py":
            assert outside <= {"opennua.server._serve"}, outside
        else:
            assert not outside, (path.name, outside)
