"""Real plugins run as they are (issue 30, part B), with real processes: `nua serve`, a
plugin whose sub-agent names Claude Code's tools and a model alias, a good stdio server
beside one that cannot start and a placeholder (`"url": ""`), HTTP servers on loopback.

- `nua deploy` and `nua deployment show` say which servers need configuring and which
  model alias nothing maps; `--model-alias` maps it;
- `glob`, `grep` and `web_fetch` run (the fetch through the egress proxy, only to what
  the deployment lists);
- the turn goes on without the server that cannot start, and the model, `nua show` and
  the session state say which and why (its stderr); with `--require-server` it fails.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.cli.conftest import Nua
from tests.e2e._proc import FakeProvider, Reply, Server
from tests.gateway._flows import ended
from tests.runtime.fixtures import mcp_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

BODY = b"<html><body>fetched through the proxy</body></html>\n"


class _Page(BaseHTTPRequestHandler):
    protocol_version: ClassVar[str] = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def page() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]  # type: ignore[misc]
    finally:
        server.shutdown()
        server.server_close()


def _plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "real", "version": "1.0.0", "description": "as published"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    (root / "AGENTS.md").write_text("Help.\n")
    (root / "agents").mkdir()
    (root / "agents" / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews code\nmodel: opus\n"
        "tools: Read, Glob, Grep, WebFetch\n---\nReview.\n"
    )
    (root / "servers").mkdir()
    (root / "servers" / "notes.py").write_text(Path(mcp_server.__file__).read_text())
    broken = "echo 'npm error code EAI_AGAIN' >&2; exit 1"
    servers = {
        "notes": {"command": "python3", "args": ["${PLUGIN_ROOT}/servers/notes.py"]},
        "broken": {"command": "sh", "args": ["-c", broken]},
        "placeholder": {"type": "http", "url": ""},
    }
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return root


def _scripts(port: int) -> dict[str, list[Reply]]:
    calls = [
        ("write_file", {"path": "src/notes.txt", "content": "find me with grep\n"}),
        ("glob", {"pattern": "**/*.txt"}),
        ("grep", {"pattern": "with gr.p", "output": "content"}),
        ("web_fetch", {"url": f"http://127.0.0.1:{port}/page"}),
        ("web_fetch", {"url": f"http://localhost:{port}/page"}),
        ("notes__lookup", {"word": "durable"}),
    ]
    return {"use everything": [Reply(calls=[c]) for c in calls] + [Reply(text="done")]}


def _deploy(nua: Nua, name: str, *extra: str) -> dict[str, Any]:
    args = ["deploy", name, "--plugin", "real", "--model", "openai:fake", *extra, "--json"]
    saved = nua(*args)
    assert saved.exit_code == 0, saved.output
    found: dict[str, Any] = json.loads(saved.output)
    return found


def _ask(http: Any, deployment: str, text: str) -> str:
    made = http.post("/v1/sessions", json={"deployment": deployment})
    assert made.status_code == 201, made.text
    sid: str = made.json()["session_id"]
    sent = http.post(
        f"/v1/sessions/{sid}/messages", json={"content": [{"type": "text", "text": text}]}
    )
    assert sent.status_code == 202, sent.text
    return sid


def test_a_real_plugin_runs_with_what_it_names_and_without_a_broken_server(
    tmp_path: Path, page: int
) -> None:
    scripts = _scripts(page)
    provider = FakeProvider(scripts).start()
    server = Server(tmp_path / "data", model="openai:fake")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    server.extra_env |= provider.env() | {"NUA_DEMO_STEP_DELAY": "0", "PATH": path}
    (tmp_path / "data").mkdir()
    nua = Nua(server.start())
    try:
        assert nua("plugin", "publish", str(_plugin(tmp_path / "plugin"))).exit_code == 0
        assert nua("plugin", "release", "real", "1.0.0").exit_code == 0
        saved = _deploy(nua, "real", "--egress", f"127.0.0.1:{page}")
        warned = [p["message"] for p in saved["problems"]]
        assert any(
            "'placeholder' has no URL" in m and "--mcp-url placeholder=" in m for m in warned
        )
        assert any("'reviewer' asks for model 'opus'" in m for m in warned), warned
        shown = nua("deployment", "show", "real").output
        assert "warning: MCP server 'placeholder' has no URL" in shown, shown
        # Port 9 (discard) listens nowhere here: the gateway cannot reach it.
        saved = _deploy(
            nua,
            "real",
            *("--egress", f"127.0.0.1:{page}", "--model-alias", "opus=openai:fake"),
            # The placeholder's loopback port, listed: the gateway tries it, nobody answers.
            *("--egress", "127.0.0.1:9"),
            *("--mcp-url", "placeholder=http://127.0.0.1:9/mcp"),
        )
        assert saved["spec"]["model_aliases"] == {"opus": "openai:fake"}
        assert saved["spec"]["tools"] == {"placeholder": {"url": "http://127.0.0.1:9/mcp"}}
        assert saved["problems"] == []
        assert "model alias  opus=openai:fake" in nua("deployment", "show", "real").output

        with server.client() as http:
            sid = _ask(http, "real", "use everything")
            turn = ended(http, sid, answer=True)
            assert turn["stop_reason"] == "end_turn", turn
            order = [i["id"] for i in turn["timeline"] if i["kind"] == "tool_call"]
            calls = [turn["tool_calls"][i] for i in order]
            outputs = [c["output"] or (c["error"] or {}).get("message", "") for c in calls]
            _, globbed, grepped, fetched, refused, looked_up = outputs
            assert globbed == "src/notes.txt"
            assert grepped == "src/notes.txt:1:find me with grep"
            assert fetched.startswith("HTTP 200") and BODY.decode() in fetched
            assert "egress_denied" in refused and "--egress localhost:" in refused, refused
            assert looked_up == "durable: a short definition"
            unavailable = {u["server"]: u for u in turn["unavailable_servers"].values()}
            assert set(unavailable) == {"broken", "placeholder"}
            assert "EAI_AGAIN" in unavailable["broken"]["message"]
            # A remote server's cause is the gateway's.
            assert unavailable["placeholder"]["code"] == "upstream_unreachable", unavailable
        # The model was told, in its instructions.
        system = [m for m in provider.requests[0]["messages"] if m["role"] == "system"]
        assert "broken" in json.dumps(system)
        # And every client shows it: `nua show` here.
        printed = nua("show", sid).output
        assert "MCP server broken unavailable" in printed, printed
        assert "npm error code EAI_AGAIN" in printed
    finally:
        server.stop()
        provider.stop()


def test_a_required_server_that_cannot_start_fails_the_turn_saying_why(tmp_path: Path) -> None:
    provider = FakeProvider({}).start()
    server = Server(tmp_path / "data", model="openai:fake")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    server.extra_env |= provider.env() | {"NUA_DEMO_STEP_DELAY": "0", "PATH": path}
    (tmp_path / "data").mkdir()
    nua = Nua(server.start())
    try:
        assert nua("plugin", "publish", str(_plugin(tmp_path / "plugin"))).exit_code == 0
        assert nua("plugin", "release", "real", "1.0.0").exit_code == 0
        saved = _deploy(nua, "strict", "--require-server", "broken")
        assert saved["spec"]["tools"] == {"broken": {"required": True}}
        assert "broken: as the plugin says (required)" in nua("deployment", "show", "strict").output
        with server.client() as http:
            sid = _ask(http, "strict", "hello")
            turn = ended(http, sid)
        assert turn["stop_reason"] != "end_turn", turn
        assert "EAI_AGAIN" in turn["error"]["message"], turn["error"]
        assert "npm error code EAI_AGAIN" in nua("show", sid).output
        assert provider.requests == []  # the model was never called
    finally:
        server.stop()
        provider.stop()
