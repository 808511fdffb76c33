"""An `.mcp.json` server of `"type": "sse"` runs through the gateway like a streamable HTTP
one (issue 30): a real SSE server (the `mcp` SDK's) that needs a credential, `nua serve`,
the CLI. The credential is injected by the gateway and redacted from the stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests._support.polling import wait_for
from tests.cli.conftest import Nua
from tests.e2e._proc import FakeProvider, Reply, Server, free_port

from ._flows import calls_by_name, ended

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).with_name("sse_mcp.py")


@pytest.fixture
def sse_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    token = f"canary-{os.urandom(12).hex()}"
    port = free_port()
    log = tmp_path / "sse.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(port)],
            env=dict(os.environ, REMOTE_MCP_TOKEN=token),
            stdout=out,
            stderr=out,
        )
    url = f"http://127.0.0.1:{port}/sse"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url, token
    finally:
        proc.terminate()
        proc.wait(10)


def _plugin(root: Path, url: str) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "events-agent", "version": "1.0.0", "description": "events"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    (root / "AGENTS.md").write_text("Use the events tools.\n")
    servers = {"events": {"type": "sse", "url": url}}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (root / "opennua.toml").write_text('[access]\negress = ["127.0.0.1"]\n')
    return root


def test_an_sse_server_runs_through_the_gateway(
    tmp_path: Path, sse_server: tuple[str, str]
) -> None:
    url, token = sse_server
    calls = [("events__lookup", {"word": "sse"}), ("events__whoami", {})]
    provider = FakeProvider({"use events": [Reply(calls=[c]) for c in calls]}).start()
    data = tmp_path / "data"
    data.mkdir()
    env = provider.env() | {"NUA_DEMO_STEP_DELAY": "0"}
    server = Server(data, model="openai:fake", env=env).start()
    nua = Nua(server)
    try:
        assert nua("secret", "set", "events-token", input=token + "\n").exit_code == 0
        assert nua("plugin", "publish", str(_plugin(tmp_path / "plugin", url))).exit_code == 0
        assert nua("plugin", "release", "events-agent", "1.0.0").exit_code == 0
        deployed = nua(
            "deploy", "events", "--plugin", "events-agent", "--model", "openai:fake",
            "--credential", "events=events-token", "--egress", "127.0.0.1:1-65535",
        )  # fmt: skip
        assert deployed.exit_code == 0, deployed.output
        with server.client() as http:
            made = http.post("/v1/sessions", json={"deployment": "events"})
            sid = made.json()["session_id"]
            content = [{"type": "text", "text": "use events"}]
            http.post(f"/v1/sessions/{sid}/messages", json={"content": content})
            turn = ended(http, sid)
        assert turn["stop_reason"] == "end_turn", turn
        assert turn["unavailable_servers"] == {}, turn["unavailable_servers"]
        found = calls_by_name(turn)
        assert found["events__lookup"]["output"] == "sse: a short definition (over SSE)"
        # The gateway sent the credential, and cut it out of what came back.
        assert found["events__whoami"]["output"] == "you called with Bearer [redacted:events-token]"
        assert token not in json.dumps(turn)

        # The gateway writes its audit in batches: wait for this turn's two calls.
        def audited() -> set[str] | None:
            out = nua("audit", "--json").output
            rows = [json.loads(line) for line in out.splitlines() if line]
            tools = {str(r.get("tool")) for r in rows if r.get("server") == "events"}
            return tools if {"lookup", "whoami"} <= tools else None

        assert wait_for(audited, timeout=10)
    finally:
        server.stop()
        provider.stop()
