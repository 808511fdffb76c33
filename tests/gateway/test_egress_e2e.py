"""The egress proxy with real processes (issue 29, high 1): `nua serve` started with a
relative `--data`, a plugin whose stdio MCP server (tests/gateway/probe_mcp.py) tries the
network from the sandbox, HTTP servers on loopback ports of the test's, the CLI.

- by default the server reaches nothing: not PostgreSQL on 127.0.0.1:5432, not the API;
- an address and port an admin listed in the deployment's egress are reachable through
  the proxy (a plain proxy request and a CONNECT tunnel; `curl` in a shell as well);
  another port of the same host, an unlisted name, and a non-public address that a
  pattern names but no admin listed as an address are refused;
- each connection is in the gateway's audit: host, port, bytes, allowed or why not;
- in a split deployment (PostgreSQL, `--gateway-url` to a `--role gateway` process) the
  same connection goes through the gateway process, over a WebSocket.
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

from opennua.secrets import SecretKey
from tests._support.polling import wait_for
from tests.cli.conftest import Nua
from tests.e2e._proc import FakeProvider, Reply, Server

from ._flows import calls_by_name, ended

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

PROBE = Path(__file__).with_name("probe_mcp.py")
BODY = b"hello from the listed server\n"


class _Hello(BaseHTTPRequestHandler):
    protocol_version: ClassVar[str] = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def upstreams() -> Iterator[tuple[int, int]]:
    """Two HTTP servers on loopback: the first is listed, the second is not."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield servers[0].server_address[1], servers[1].server_address[1]  # type: ignore[misc]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def _plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "probe", "version": "1.0.0", "description": "network probe"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    (root / "AGENTS.md").write_text("Probe the network.\n")
    (root / "servers").mkdir()
    (root / "servers" / "probe.py").write_text(PROBE.read_text())
    server = {"command": "python3", "args": ["${PLUGIN_ROOT}/servers/probe.py"]}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"probe": server}}))
    # The plugin asks for the whole internet: a request, which the deployment overrules.
    (root / "opennua.toml").write_text('[access]\negress = ["*"]\n')
    return root


def _scripts(api: int, listed: int, unlisted: int) -> dict[str, list[Reply]]:
    direct = [("probe__connect", {"host": "127.0.0.1", "port": p}) for p in (5432, api, listed)]
    proxied = [
        ("probe__fetch", {"url": f"http://127.0.0.1:{listed}/"}),
        ("probe__tunnel", {"host": "127.0.0.1", "port": listed}),
        ("probe__fetch", {"url": f"http://127.0.0.1:{unlisted}/"}),
        ("probe__fetch", {"url": f"http://localhost:{listed}/"}),
    ]
    curl = f"curl -sS --noproxy '' http://127.0.0.1:{listed}/"
    return {
        "probe direct": [Reply(calls=[c]) for c in direct] + [Reply(text="done")],
        "probe proxy": [Reply(calls=[c]) for c in proxied] + [Reply(text="done")],
        "probe open": [Reply(calls=[proxied[0]]), Reply(text="done")],
        "probe shell": [Reply(calls=[("shell", {"command": curl})]), Reply(text="done")],
    }


def _outputs(turn: dict[str, Any], script: list[Reply]) -> list[str]:
    """The output of each call of `script`, in the script's order."""
    found = {
        (c["name"], json.dumps(c["input"], sort_keys=True)): c["output"]
        or (c["error"] or {}).get("message", "")
        for c in turn["tool_calls"].values()
    }
    return [
        found[(name, json.dumps(args, sort_keys=True))] for r in script for name, args in r.calls
    ]


def _env(provider: FakeProvider) -> dict[str, str]:
    # `.mcp.json` says `python3`, as a plugin author writes it: this interpreter's, with `mcp`.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return provider.env() | {"NUA_DEMO_STEP_DELAY": "0", "PATH": path}


def _deploy(nua: Nua, name: str, *egress: str) -> dict[str, Any]:
    args = ["deploy", name, "--plugin", "probe", "--model", "openai:fake"]
    for entry in egress:
        args += ["--egress", entry]
    saved = nua(*args, "--json")
    assert saved.exit_code == 0, saved.output
    found: dict[str, Any] = json.loads(saved.output)
    return found


def _egress_audit(nua: Nua) -> list[dict[str, Any]]:
    listed = nua("audit", "--json")
    assert listed.exit_code == 0, listed.output
    records = [json.loads(line) for line in listed.output.splitlines() if line.strip()]
    return [r for r in records if r["kind"] == "egress"]


def test_sandboxed_code_reaches_only_what_the_deployment_lists(
    tmp_path: Path, upstreams: tuple[int, int]
) -> None:
    listed, unlisted = upstreams
    # A relative --data (issue 29, low): every local MCP server failed to start with one.
    server = Server(tmp_path / "data", model="openai:fake", relative_data=True)
    scripts = _scripts(server.port, listed, unlisted)
    provider = FakeProvider(scripts).start()
    server.extra_env |= _env(provider)
    (tmp_path / "data").mkdir()
    nua = Nua(server.start())
    try:
        assert nua("plugin", "publish", str(_plugin(tmp_path / "plugin"))).exit_code == 0
        assert nua("plugin", "release", "probe", "1.0.0").exit_code == 0
        saved = _deploy(nua, "probe", f"127.0.0.1:{listed}")
        assert saved["spec"]["egress"] == [f"127.0.0.1:{listed}"]
        assert saved["egress_requested"] == ["*"]  # shown, not enforced
        shown = nua("deployment", "show", "probe")
        assert f"egress       127.0.0.1:{listed}; the plugin requests: *" in shown.output
        _deploy(nua, "open", f"*:{listed}")
        with server.client() as http:
            turn = ended(http, _ask_on(http, "probe", "probe direct"))
            assert turn["stop_reason"] == "end_turn", turn
            # PostgreSQL, the API, even the listed port: no network but the proxy.
            for out in _outputs(turn, scripts["probe direct"]):
                assert out.startswith("refused:"), out

            turn = ended(http, _ask_on(http, "probe", "probe proxy"))
            fetched, tunnelled, other_port, by_name = _outputs(turn, scripts["probe proxy"])
            assert fetched.startswith("HTTP/1.1 200") and fetched.endswith(BODY.decode())
            # (The tool returns what came through the tunnel once CONNECT answered 200.)
            assert tunnelled.startswith("HTTP/1.1 200") and tunnelled.endswith(BODY.decode())
            assert other_port.startswith("HTTP/1.1 403") and "egress_denied" in other_port
            assert by_name.startswith("HTTP/1.1 403") and "egress_denied" in by_name

            # `*:PORT` names any host, but a loopback address only an address entry allows.
            turn = ended(http, _ask_on(http, "open", "probe open"))
            (refused,) = _outputs(turn, scripts["probe open"])
            assert refused.startswith("HTTP/1.1 403") and "egress_address_denied" in refused

            # An ordinary client in a shell command goes through the proxy as well.
            turn = ended(http, _ask_on(http, "probe", "probe shell"), answer=True)
            assert calls_by_name(turn)["shell"]["output"] == BODY.decode(), turn

        records = wait_for(lambda: len(r := _egress_audit(nua)) >= 6 and r, timeout=10)
        seen = {(r["port"], r["outcome"], r["code"]) for r in records}
        assert (listed, "ok", None) in seen
        assert (unlisted, "refused", "egress_denied") in seen
        assert (listed, "refused", "egress_address_denied") in seen
        ok = [r for r in records if r["outcome"] == "ok"]
        assert all(r["host"] == "127.0.0.1" and r["bytes_down"] > len(BODY) for r in ok)
        assert all(r["bytes_up"] > 0 and r["execution_id"] for r in ok)
        assert 5432 not in {r["port"] for r in records}  # never reached the proxy at all
        printed = nua("audit").output  # a connection reads as one, by the record's kind
        assert f"egress 127.0.0.1:{unlisted} up 0 B down 0 B" in printed, printed
    finally:
        server.stop()
        provider.stop()


def _ask_on(http: Any, deployment: str, text: str) -> str:
    made = http.post("/v1/sessions", json={"deployment": deployment})
    assert made.status_code == 201, made.text
    sid: str = made.json()["session_id"]
    sent = http.post(
        f"/v1/sessions/{sid}/messages", json={"content": [{"type": "text", "text": text}]}
    )
    assert sent.status_code == 202, sent.text
    return sid


@pytest.mark.postgres
def test_a_split_deployment_tunnels_egress_through_the_gateway_process(
    tmp_path: Path, upstreams: tuple[int, int], pg_url: str
) -> None:
    listed, unlisted = upstreams
    scripts = _scripts(0, listed, unlisted)
    provider = FakeProvider(scripts).start()
    key = {"NUA_SECRET_KEY": SecretKey.generate().encoded()}
    data = tmp_path / "data"
    data.mkdir()
    gateway = Server(data, db=pg_url, role="gateway", env=key)
    server = Server(
        data,
        db=pg_url,
        model="openai:fake",
        env=_env(provider) | key,
        args=["--gateway-url", gateway.url],
    )
    nua = Nua(server.start())
    try:
        gateway.start()
        assert nua("plugin", "publish", str(_plugin(tmp_path / "plugin"))).exit_code == 0
        assert nua("plugin", "release", "probe", "1.0.0").exit_code == 0
        _deploy(nua, "probe", f"127.0.0.1:{listed}")
        with server.client() as http:
            turn = ended(http, _ask_on(http, "probe", "probe proxy"))
            fetched, tunnelled, other_port, _ = _outputs(turn, scripts["probe proxy"])
            assert fetched.endswith(BODY.decode()) and tunnelled.endswith(BODY.decode())
            assert "egress_denied" in other_port
            execution_id = turn["execution_id"]
        records = wait_for(lambda: len(r := _egress_audit(nua)) >= 4 and r, timeout=10)
        assert {r["execution_id"] for r in records} == {execution_id}
        assert (listed, "ok") in {(r["port"], r["outcome"]) for r in records}
        # With the gateway gone the proxy has nowhere to go: a clear 502, not the network.
        gateway.stop()
        with server.client() as http:
            turn = ended(http, _ask_on(http, "probe", "probe open"))
            (answer,) = _outputs(turn, scripts["probe open"])
            assert answer.startswith("HTTP/1.1 502") and "gateway_unavailable" in answer
    finally:
        server.stop()
        gateway.stop()
        provider.stop()
