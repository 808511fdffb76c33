"""`nua serve` as a real process: private files, the Host allow-list, startup checks."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

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


def test_a_sqlite_file_that_cannot_be_opened_exits_69_at_once(tmp_path: Path) -> None:
    """Only a PostgreSQL server is waited for (`--db-wait`): a SQLite file that cannot be
    opened will not come back by itself, so the operator hears it now, in one line."""
    (tmp_path / "nua.db").mkdir()
    args = serve_args(tmp_path / "data", free_port(), "--db", f"sqlite:///{tmp_path}/nua.db")
    started = time.monotonic()
    done = subprocess.run(args, capture_output=True, timeout=60, check=False)
    assert done.returncode == 69, done
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "cannot open" in lines[0], lines
    assert time.monotonic() - started < 30, "it did not wait as for a database server"


def test_the_url_file_reaches_wildcard_binds_on_loopback() -> None:
    from opennua.server._serve import _reach

    assert _reach("0.0.0.0") == _reach("::") == "127.0.0.1"
    assert _reach("10.0.0.5") == "10.0.0.5"
    assert _reach("::1") == "[::1]"


def test_a_relative_data_directory_is_made_absolute_at_startup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opennua.server import ServeConfig

    monkeypatch.chdir(tmp_path)
    config = ServeConfig(data_dir=Path("data"))
    assert config.data_dir == tmp_path / "data"
    assert config.db_url == f"sqlite:///{tmp_path}/data/nua.db"


def test_what_nua_serve_imports_before_http_answers_is_the_host_side_only() -> None:
    # `nua serve` took 6-10 s to be ready after a kill -9 (issue 35): it imported the
    # whole agent runtime first. These load after HTTP answers, or when first used.
    late = ("pydantic_ai", "mcp", "psycopg", "aiohttp", "genai_prices", "nio")
    late += ("opennua.runtime._loop", "opennua.supervisor._supervisor")
    code = (
        "import sys, opennua.cli._app, opennua.server; "
        f"print(' '.join(m for m in {late!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""


async def test_http_answers_while_the_supervisor_is_still_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ready means the store opened and HTTP listens; the Supervisor (and the recovery it
    does) comes after, behind a server that already answers."""
    from opennua.server import ServeConfig, _serve

    gate = threading.Event()
    load = _serve._load_executing

    def held(model: str) -> Any:
        assert gate.wait(30)
        return load(model)

    monkeypatch.setattr(_serve, "_load_executing", held)
    port = free_port()
    config = ServeConfig(data_dir=tmp_path / "data", port=port, sandbox="none")
    serving = asyncio.create_task(_serve.serve(config))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(600):
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/readyz")).status_code == 200:
                        break
                assert not serving.done(), serving
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("never ready")
            assert not gate.is_set()  # ready, and the Supervisor not even loaded yet
            token = (tmp_path / "data" / "token").read_text().strip()
            auth = {"Authorization": f"Bearer {token}"}
            created = await client.post("/v1/sessions", json={"title": "t"}, headers=auth)
            assert created.status_code == 201, created.text
    finally:
        gate.set()
        os.kill(os.getpid(), signal.SIGTERM)  # serve() stops on it, as `nua serve` does
        await asyncio.wait_for(serving, 30)
