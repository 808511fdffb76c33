"""A small plugin's files and the HTTP calls that publish it, for tests that talk to the
server directly (the client's `publish_plugin` is the product's way)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx

OCTETS = {"Content-Type": "application/octet-stream"}
PROBLEM = "application/problem+json"


def plugin_files(version: str, *, name: str = "helper") -> dict[str, bytes]:
    manifest = {"name": name, "version": version, "description": "helps"}
    return {
        ".claude-plugin/plugin.json": json.dumps(manifest).encode(),
        "AGENTS.md": b"Be helpful.\n",
        ".mcp.json": json.dumps({"mcpServers": {"notes": {"command": "python3"}}}).encode(),
    }


def listing(files: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    return {
        path: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        for path, data in files.items()
    }


async def upload(client: httpx.AsyncClient, files: dict[str, bytes]) -> list[str]:
    """Upload what the server lacks; return the sha256s that were uploaded."""
    by_sha = {hashlib.sha256(d).hexdigest(): d for d in files.values()}
    r = await client.post("/v1/plugin-files/missing", json={"sha256": sorted(by_sha)})
    assert r.status_code == 200, r.text
    for sha in r.json()["missing"]:
        put = await client.post("/v1/plugin-files", content=by_sha[sha], headers=OCTETS)
        assert put.status_code == 201 and put.json()["sha256"] == sha, put.text
    missing: list[str] = r.json()["missing"]
    return missing


async def publish(client: httpx.AsyncClient, files: dict[str, bytes]) -> httpx.Response:
    await upload(client, files)
    return await client.post("/v1/plugins", json={"files": listing(files)})


def problem(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The body of a problem response, checked: its status, media type and `code`."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM
    body: dict[str, Any] = r.json()
    assert body["code"] == code
    return body


def publish_helper(client: httpx.Client, version: str) -> dict[str, Any]:
    """Publish version `version` of the `helper` plugin (blocking client)."""
    manifest = {"name": "helper", "version": version, "description": "the helper"}
    files = {
        ".claude-plugin/plugin.json": json.dumps(manifest).encode(),
        "AGENTS.md": f"You are helper {version}.\n".encode(),
    }
    by_sha = {hashlib.sha256(data).hexdigest(): data for data in files.values()}
    missing = client.post("/v1/plugin-files/missing", json={"sha256": sorted(by_sha)}).json()
    for sha in missing["missing"]:
        octets = {"Content-Type": "application/octet-stream"}
        uploaded = client.post("/v1/plugin-files", content=by_sha[sha], headers=octets)
        assert uploaded.status_code == 201, uploaded.text
    listing = {
        p: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for p, d in files.items()
    }
    r = client.post("/v1/plugins", json={"files": listing})
    assert r.status_code == 201, r.text
    published: dict[str, Any] = r.json()
    return published


def release_helper(client: httpx.Client, version: str) -> None:
    """Point the `helper` plugin's `stable` channel at `version`."""
    r = client.post("/v1/plugins/helper/channels/stable/release", json={"version": version})
    assert r.status_code == 200, r.text
