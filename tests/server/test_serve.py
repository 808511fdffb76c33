"""`nua serve` as a real process: private files, the Host allow-list, startup checks."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import httpx
import pytest

from ._serve_proc import free_port, nua_serve, serve_args

pytestmark = pytest.mark.e2e


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_what_serve_writes_is_private_whatever_the_umask(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    with nua_serve(data, umask=0) as served:
        assert (data / "url").read_text() == f"http://127.0.0.1:{served.port}\n"
        assert _mode(data) == 0o700
        assert _mode(data.parent) == 0o700  # created by serve as well
        assert _mode(data / "token") == 0o600
        assert _mode(data / "url") == 0o600


def test_only_the_hosts_this_server_is_reached_by_are_answered(tmp_path: Path) -> None:
    extra = ("--allowed-host", "nua.example")
    with nua_serve(tmp_path / "data", *extra) as served, served.client() as client:
        for host in (f"127.0.0.1:{served.port}", f"localhost:{served.port}", "nua.example"):
            response = client.get("/v1/sessions", headers={"Host": host})
            assert response.status_code == 200, host
        for host in ("evil.example", f"evil.example:{served.port}", "127.0.0.1:1", ""):
            response = client.get("/v1/sessions", headers={"Host": host})
            assert response.status_code == 421, host
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json()["code"] == "host_not_allowed"
        # The web UI's files and the login link are behind the same check ...
        assert client.get("/", headers={"Host": "evil.example"}).status_code == 421
        # ... health checks are not (probes address a server by an IP of their own).
        assert client.get("/healthz", headers={"Host": "10.1.2.3:80"}).status_code == 200
        with httpx.Client(base_url=served.url) as anonymous:
            login = anonymous.get(
                "/login", params={"token": served.token}, headers={"Host": "evil.example"}
            )
            assert login.status_code == 421 and "set-cookie" not in login.headers


def test_a_missing_provider_key_is_reported_at_startup(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NUA_"))}
    args = serve_args(tmp_path / "data", free_port(), "--model", "openai:gpt-4o-mini")
    done = subprocess.run(args, env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 78
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0], lines
    assert not (tmp_path / "data").exists()  # nothing was set up for a server that cannot run


def test_the_url_file_reaches_wildcard_binds_on_loopback() -> None:
    from opennua.server._serve import _reach

    assert _reach("0.0.0.0") == _reach("::") == "127.0.0.1"
    assert _reach("10.0.0.5") == "10.0.0.5"
    assert _reach("::1") == "[::1]"
