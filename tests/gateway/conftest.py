"""A real remote MCP server subprocess that requires a bearer token, a plugin that uses
it, and a real `nua serve` whose model (a FakeProvider) calls its tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e._proc import free_port

SCRIPT = Path(__file__).with_name("remote_mcp.py")


@dataclass
class Remote:
    url: str
    port: int
    token: str
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> bytes:
        return self.log.read_bytes()


def start_remote(token: str, folder: Path) -> Remote:
    port = free_port()
    log = folder / f"remote-mcp-{port}.log"
    env = dict(os.environ, REMOTE_MCP_TOKEN=token)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(port)], env=env, stdout=out, stderr=out
        )
    remote = Remote(f"http://127.0.0.1:{port}/mcp", port, token, proc, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(log.read_text())
        try:
            httpx.post(remote.url, json={}, timeout=1)
            return remote
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the remote MCP server did not start")


@pytest.fixture
def remote(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Remote]:
    token = getattr(request, "param", None) or f"canary-{os.urandom(12).hex()}"
    server = start_remote(token, tmp_path)
    try:
        yield server
    finally:
        server.proc.terminate()
        server.proc.wait(10)


def plugin_dir(root: Path, url: str, *, egress: list[str], name: str = "notes-agent") -> Path:
    """A plugin whose only MCP server is the remote one at `url`."""
    (root / ".claude-plugin").mkdir(parents=True)
    manifest: dict[str, Any] = {"name": name, "version": "1.0.0", "description": "notes"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    (root / "AGENTS.md").write_text("Use the notes tools.\n")
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"notes": {"url": url}}}))
    hosts = ", ".join(f'"{h}"' for h in egress)
    (root / "opennua.toml").write_text(f"[access]\negress = [{hosts}]\n")
    return root
