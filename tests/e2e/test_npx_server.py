"""A real stdio MCP server from the npm registry, started by `npx -y` as real plugins start
it (issue 30): `@modelcontextprotocol/server-memory` under the default sandox (bubblewrap,
no network), reaching the registry only because the deployment lists it for the egress
proxy, and its tool results reach `nua show`.

The registry is whatever npm is configured with here (a mirror in CI); its host is what
the deployment lists. Its CA, when it is not a public one, is the one Node is told of
(NODE_EXTRA_CA_CERTS), passed as the deployment's `${VAR}`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.cli.conftest import Nua
from tests.e2e._proc import FakeProvider, Reply, Server
from tests.gateway._flows import calls_by_name, ended

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

PACKAGE = "@modelcontextprotocol/server-memory"


def _registry() -> str:
    if shutil.which("npx") is None or shutil.which("bwrap") is None:
        pytest.skip("needs npx and bubblewrap")
    found = subprocess.run(
        ["npm", "config", "get", "registry"], capture_output=True, text=True, check=True
    ).stdout.strip()
    parts = urlsplit(found)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def _plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "memory-agent", "version": "1.0.0", "description": "remembers"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    server = {
        "command": "npx",
        "args": ["-y", PACKAGE],
        "env": {"NODE_EXTRA_CA_CERTS": "${NODE_EXTRA_CA_CERTS:-}"},
    }
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"memory": server}}))
    return root


def test_an_npx_server_runs_in_the_sandbox_through_the_egress_proxy(tmp_path: Path) -> None:
    registry = _registry()
    entity = {"name": "opennua", "entityType": "project", "observations": ["runs real plugins"]}
    calls = [("memory__create_entities", {"entities": [entity]}), ("memory__read_graph", {})]
    provider = FakeProvider({"remember": [Reply(calls=[c]) for c in calls]}).start()
    data = tmp_path / "data"
    data.mkdir()
    server = Server(data, model="openai:fake", env=provider.env() | {"NUA_DEMO_STEP_DELAY": "0"})
    nua = Nua(server.start())
    try:
        assert nua("plugin", "publish", str(_plugin(tmp_path / "plugin"))).exit_code == 0
        assert nua("plugin", "release", "memory-agent", "1.0.0").exit_code == 0
        args = ["deploy", "memory", "--plugin", "memory-agent", "--model", "openai:fake"]
        # Without the registry listed, npx cannot fetch the server: the turn goes on
        # without it and says why.
        assert nua(*args).exit_code == 0
        with server.client() as http:
            sid = _ask(http, "remember")
            turn = ended(http, sid, answer=True)
        [unavailable] = turn["unavailable_servers"].values()
        assert unavailable["server"] == "memory" and "npm" in unavailable["message"], unavailable

        ca = os.environ.get("NODE_EXTRA_CA_CERTS")
        listed = [
            *args,
            "--egress",
            registry,
            *(["--env", f"NODE_EXTRA_CA_CERTS={ca}"] if ca else []),
        ]
        assert nua(*listed).exit_code == 0
        with server.client() as http:
            sid = _ask(http, "remember")
            turn = ended(http, sid, answer=True)
        assert turn["stop_reason"] == "end_turn", turn
        assert turn["unavailable_servers"] == {}, turn["unavailable_servers"]
        found = calls_by_name(turn)
        assert found["memory__create_entities"]["status"] == "completed", found
        graph = found["memory__read_graph"]["output"]
        assert "runs real plugins" in graph, graph
        shown = nua("show", sid).output
        assert "runs real plugins" in shown, shown
    finally:
        server.stop()
        provider.stop()


def _ask(http: object, text: str) -> str:
    made = http.post("/v1/sessions", json={"deployment": "memory"})  # type: ignore[attr-defined]
    sid: str = made.json()["session_id"]
    content = [{"type": "text", "text": text}]
    sent = http.post(f"/v1/sessions/{sid}/messages", json={"content": content})  # type: ignore[attr-defined]
    assert sent.status_code == 202, sent.text
    return sid
