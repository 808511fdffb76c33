"""Issue 12 hardening: the login cookie (per port, expiring, /logout), WebSocket refusals
and close codes, and 405 with `Allow`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin

from ._harness import AUTH, TOKEN, Env, environment, serving


@pytest.fixture
async def env(tmp_path: Path) -> Any:
    async with environment(f"sqlite:///{tmp_path}/nua.db", tmp_path) as e:
        yield e


async def test_the_login_cookie_is_per_port_expires_and_logs_out(env: Env) -> None:
    async with env.client() as client:
        login = await client.get("/login", params={"token": TOKEN})
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert cookie.startswith("nua_session_80=")  # the test server's port
        assert "Max-Age=604800" in cookie and "HttpOnly" in cookie
        assert TOKEN not in cookie
        assert (await client.get("/v1/sessions")).status_code == 200
        # An edited cookie opens nothing.
        value = client.cookies["nua_session_80"]
        forged = httpx.Cookies({"nua_session_80": "9" + value[1:]})
        async with env.client(cookies=forged) as other:
            assert (await other.get("/v1/sessions")).status_code == 401
        # Past its expiry the cookie is refused even if a browser kept sending it.
        env.clock.advance(7 * 24 * 3600 + 1)
        expired = await client.get("/v1/sessions")
        assert expired.status_code == 401 and expired.json()["code"] == "unauthorized"
        env.clock.advance(-(7 * 24 * 3600 + 1))
        assert (await client.get("/v1/sessions")).status_code == 200
        logout = await client.post("/logout")
        assert logout.status_code == 303
        assert 'nua_session_80=""' in logout.headers["set-cookie"]
        assert "Max-Age=0" in logout.headers["set-cookie"]
        assert (await client.get("/v1/sessions")).status_code == 401


async def test_websocket_refusals_and_close_codes(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await _refusals_and_close_codes(env, caplog.handler)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not errors, [r.getMessage() for r in errors]


async def _refusals_and_close_codes(env: Env, handler: logging.Handler) -> None:
    async with serving(env.app) as base, _uvicorn_logs_to(handler):
        url = f"ws://{base}/v1/sessions"
        async with httpx.AsyncClient(base_url=f"http://{base}", headers=AUTH) as client:
            sid = (await client.post("/v1/sessions", json={})).json()["session_id"]
            login = await client.get("/login", params={"token": TOKEN})
        name = f"nua_session_{base.rsplit(':', 1)[1]}"
        cookie = {"Cookie": f"{name}={login.cookies[name]}"}
        for headers, origin, status in (
            ({}, None, 401),
            ({"Authorization": "Bearer wrong"}, None, 401),
            (cookie, Origin("http://evil.example"), 403),
        ):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(f"{url}/{sid}/ws", additional_headers=headers, origin=origin):
                    pass
            assert refused.value.response.status_code == status
        # An unknown session: the socket opens, then closes with the documented 4404.
        async with connect(f"{url}/ses_missing/ws", additional_headers=AUTH) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4404
        assert closed.value.rcvd.reason == "session not found"


async def test_a_method_a_route_does_not_take_is_405_with_allow(env: Env) -> None:
    async with env.client(headers=AUTH) as client:
        for method, path, allowed in (
            ("TRACE", "/v1/sessions", {"GET", "POST"}),
            ("DELETE", "/v1/sessions/ses_x", {"GET", "PATCH"}),
            ("PUT", "/v1/sessions/ses_x/messages", {"POST"}),
        ):
            response = await client.request(method, path)
            assert response.status_code == 405, (method, path)
            assert response.json()["code"] == "method_not_allowed"
            assert set(response.headers["allow"].split(", ")) == allowed


@contextlib.asynccontextmanager
async def _uvicorn_logs_to(handler: logging.Handler) -> AsyncIterator[None]:
    """uvicorn's error log does not propagate, and configuring a server resets it."""
    log = logging.getLogger("uvicorn.error")
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)
