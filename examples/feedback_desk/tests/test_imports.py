"""The desk uses opennua only through its public client: no import of any other opennua
module (the CLI, HTTP and webhooks are the rest of its surface)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "feedback_desk"


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def test_only_opennua_client_is_imported() -> None:
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) >= 8
    used = {name for path in sources for name in _imports(path) if name.split(".")[0] == "opennua"}
    assert used == {"opennua.client"}, used


def test_the_check_sees_an_internal_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from opennua.runtime import ScriptedModel\nimport opennua.store as s\n")
    assert _imports(bad) == ["opennua.runtime", "opennua.store"]
