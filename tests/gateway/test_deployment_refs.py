"""Credential references and the sandbox-environment setting when a deployment is saved
(over HTTP, on both backends), and how a confirmed setting reaches a stdio server."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.runtime import McpServer, default_agent
from opennua.supervisor._snapshot import _with_sandbox_env
from tests.server._harness import AUTH, Env, environment


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    url = f"sqlite:///{tmp_path}/nua.db"
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
    async with environment(url, tmp_path) as e:
        yield e


FILES = {
    ".claude-plugin/plugin.json": json.dumps({"name": "mixed", "version": "1.0.0"}).encode(),
    "AGENTS.md": b"Mixed servers.\n",
    ".mcp.json": json.dumps(
        {
            "mcpServers": {
                "local": {"command": "python3", "args": ["server.py"]},
                "notes": {"url": "http://127.0.0.1:9/mcp"},
            }
        }
    ).encode(),
    "opennua.toml": b'[access]\negress = ["127.0.0.1"]\n',
}


async def _publish(c: httpx.AsyncClient) -> None:
    by_sha = {hashlib.sha256(d).hexdigest(): d for d in FILES.values()}
    for sha, data in by_sha.items():
        r = await c.post(
            "/v1/plugin-files", content=data, headers={"Content-Type": "application/octet-stream"}
        )
        assert r.status_code == 201 and r.json()["sha256"] == sha
    listing = {
        p: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for p, d in FILES.items()
    }
    assert (await c.post("/v1/plugins", json={"files": listing})).status_code == 201
    released = await c.post("/v1/plugins/mixed/channels/stable/release", json={"version": "1.0.0"})
    assert released.status_code == 200


def _problem(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["code"] == code, body
    return body


async def test_references_and_the_sandbox_setting_are_checked_when_saved(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        await _publish(c)
        workspace = (await c.get("/v1/whoami")).json()["workspaces"][0]["workspace_id"]
        base = {"plugin": "mixed", "model": "scripted:demo"}
        ref = {"server": "notes", "secret": "notes-token", "header": "X-Api-Key", "prefix": ""}
        missing = _problem(
            await c.put("/v1/deployments/d", json={**base, "credentials": [ref]}),
            422,
            "secret_missing",
        )
        assert missing["secret"] == "notes-token"
        await env.app.state.context.secrets.put(workspace, "notes-token", "v1")
        saved = await c.put("/v1/deployments/d", json={**base, "credentials": [ref]})
        assert saved.status_code == 200 and saved.json()["spec"]["credentials"] == [ref]
        assert saved.json()["spec"].get("sandbox_env", []) == []  # off by default

        # Egress at deploy time: an override to a host outside the plugin's list.
        evil = {**base, "tools": {"notes": {"url": "https://evil.example/mcp"}}}
        refused = _problem(await c.put("/v1/deployments/e", json=evil), 422, "egress_denied")
        assert refused["host"] == "evil.example" and "evil.example" in refused["detail"]

        # Secrets in the sandbox: refused unless confirmed, and only for stdio servers.
        entry = {"server": "local", "env": "LOCAL_TOKEN", "secret": "notes-token"}
        unconfirmed = {**base, "sandbox_env": [entry]}
        detail = _problem(
            await c.put("/v1/deployments/s", json=unconfirmed), 422, "invalid_deployment"
        )["detail"]
        assert "sandbox_env_confirmed" in detail and "outside" in detail
        remote_entry = {**entry, "server": "notes"}
        _problem(
            await c.put(
                "/v1/deployments/s",
                json={**base, "sandbox_env": [remote_entry], "sandbox_env_confirmed": True},
            ),
            422,
            "invalid_deployment",
        )
        confirmed = {**unconfirmed, "sandbox_env_confirmed": True}
        ok = await c.put("/v1/deployments/s", json=confirmed)
        assert ok.status_code == 200, ok.text
        assert ok.json()["spec"]["sandbox_env"] == [entry] and "v1" not in ok.text


async def test_a_confirmed_setting_fills_only_that_stdio_servers_environment() -> None:
    agent = default_agent("scripted:demo")
    local = McpServer("local", command="python3", env={"KEEP": "1"})
    remote = McpServer("notes", url="http://127.0.0.1:9/mcp")
    agent = dataclasses.replace(agent, mcp_servers=(local, remote))
    asked: list[tuple[str, str]] = []

    async def secret(workspace_id: str, name: str) -> str:
        asked.append((workspace_id, name))
        return "the-value"

    entries = [{"server": "local", "env": "LOCAL_TOKEN", "secret": "tok"}]
    filled = await _with_sandbox_env(agent, entries, "wsp_a", secret)
    by_name = {s.name: s for s in filled.mcp_servers}
    assert by_name["local"].env == {"KEEP": "1", "LOCAL_TOKEN": "the-value"}
    assert by_name["notes"].env is None and asked == [("wsp_a", "tok")]
    assert filled.digest == agent.digest  # values are not part of the definition
