"""How `nua serve` ships the web UI: static files with the right types and headers, ahead of
auth but without opening anything else; the login link; large tool outputs by reference.

No browser here (tests/browser drives Chromium); these run in-process.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.protocol import action_id, timestamp
from opennua.server._serve import ServeConfig, _announce
from opennua.server._web import CSP, WEB_DIR, load_files
from tests.server._harness import AUTH, TOKEN, Env, environment


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with environment(f"sqlite:///{tmp_path}/nua.db", tmp_path) as e:
        yield e


MODULES = [
    "app.js",
    "api.js",
    "canonical.js",
    "context.js",
    "controller.js",
    "live.js",
    "overlay.js",
    "payloads.js",
    "reducer.js",
    "store.js",
    "views/audit.js",
    "views/automation.js",
    "views/deployments.js",
    "views/dom.js",
    "views/everyone.js",
    "views/format.js",
    "views/kit.js",
    "views/list.js",
    "views/people.js",
    "views/plugins.js",
    "views/secrets.js",
    "views/session.js",
    "views/timeline.js",
    "views/usage.js",
    "vendor/uPlot.esm.js",
]


async def test_the_shell_loads_without_credentials_and_locks_itself_down(env: Env) -> None:
    async with env.client() as client:
        page = await client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"] == CSP
        assert "script-src 'self'" in CSP and "connect-src 'self'" in CSP
        # `no-referrer` would make Chromium send `Origin: null` on same-origin POSTs, which
        # the guard refuses for cookie-authenticated state changes.
        assert page.headers["referrer-policy"] == "same-origin"
        assert page.headers["x-frame-options"] == "DENY"
        assert '<script type="module" src="/ui/app.js">' in page.text
        for name in MODULES:
            module = await client.get(f"/ui/{name}")
            assert module.status_code == 200, name
            assert module.headers["content-type"] == "text/javascript; charset=utf-8", name
            assert module.headers["x-content-type-options"] == "nosniff"
            assert module.content == (WEB_DIR / name).read_bytes()
        for sheet in ("style.css", "vendor/uPlot.min.css"):
            css = await client.get(f"/ui/{sheet}")
            assert css.headers["content-type"] == "text/css; charset=utf-8"
        assert (await client.get("/ui/icon.svg")).headers["content-type"] == "image/svg+xml"


def test_every_file_the_page_references_is_shipped() -> None:
    # A missing or misspelt module would only fail in a browser: follow index.html's links
    # and every module's static imports, and require each target to be served.
    files = load_files()
    index = files["/"].body.decode()
    wanted = set(re.findall(r'(?:src|href)="(/ui/[^"]+)"', index))
    for path, file in files.items():
        if path.endswith(".js"):
            base = path.rsplit("/", 1)[0]
            for target in re.findall(r'from "(\.[^"]+)"', file.body.decode()):
                wanted.add(posixpath.normpath(f"{base}/{target}"))
    assert wanted <= set(files), sorted(wanted - set(files))
    shipped = {path.removeprefix("/ui/") for path in files if path.endswith(".js")}
    assert shipped == set(MODULES)


async def test_conditional_and_head_requests(env: Env) -> None:
    async with env.client() as client:
        first = await client.get("/ui/app.js")
        etag = first.headers["etag"]
        assert first.headers["cache-control"] == "no-cache"
        again = await client.get("/ui/app.js", headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.content == b""
        head = await client.head("/ui/app.js")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == str(len(first.content))


async def test_nothing_but_the_shipped_files_bypasses_auth(env: Env) -> None:
    async with env.client() as client:
        for path in (
            "/ui/missing.js",
            "/ui/",
            "/ui/../server/_web.py",
            "/ui/%2e%2e/server/_app.py",
        ):
            response = await client.get(path)
            assert response.status_code == 401, path
        # Other methods on the UI's paths go to the app, behind the guard.
        assert (await client.post("/", json={})).status_code == 401
        assert (await client.get("/v1/sessions")).status_code == 401
    async with env.client(headers=AUTH) as client:
        assert (await client.get("/ui/missing.js")).status_code == 404


async def test_the_login_link_sets_the_cookie_and_lands_on_the_ui(env: Env) -> None:
    async with env.client() as client:
        login = await client.get("/login", params={"token": TOKEN})
        assert login.status_code == 303 and login.headers["location"] == "/"
        landed = await client.get(login.headers["location"])
        assert landed.status_code == 200 and "/ui/app.js" in landed.text
        # The cookie the link set is what the UI's API calls ride on.
        assert (await client.get("/v1/sessions")).status_code == 200


def test_serve_prints_the_full_login_link(tmp_path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _announce(ServeConfig(data_dir=tmp_path, port=7421), "scripted:demo", "sup_x", "tok-123")
    assert "web UI: http://127.0.0.1:7421/login?token=tok-123" in out.getvalue()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _announce(ServeConfig(data_dir=tmp_path, host="0.0.0.0", port=80), "m", "sup_x", "t")
    assert "web UI: http://127.0.0.1:80/login?token=t" in out.getvalue()


async def _tool_call_with_output(env: Env, client: httpx.AsyncClient, output: bytes) -> Any:
    """A session whose turn ran one tool call with a large output stored by reference."""
    sid = (await client.post("/v1/sessions", json={"title": "t"})).json()["session_id"]
    body = {"content": [{"type": "text", "text": "go"}]}
    ids = (await client.post(f"/v1/sessions/{sid}/messages", json=body)).json()
    claimed = await env.store.claim("sup_test", env.clock(), 15.0)
    assert claimed is not None
    blob = await env.store.blobs.put(output)
    execution, turn = ids["execution_id"], ids["turn_id"]

    def action(key: str, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "v": 1,
            "session_id": sid,
            "id": action_id(execution, key),
            "type": kind,
            "ts": timestamp(env.clock()),
            "turn_id": turn,
            "data": data,
        }

    small, large = "call_small", "call_large"
    started = {"title": "Read", "kind": "read", "name": "read_file", "input": {}}
    actions = [
        action("s1", "tool_call.started", {"tool_call_id": small, **started}),
        action(
            "u1",
            "tool_call.updated",
            {"tool_call_id": small, "status": "completed", "output": "ok"},
        ),
        action("s2", "tool_call.started", {"tool_call_id": large, **started}),
        action(
            "u2",
            "tool_call.updated",
            {
                "tool_call_id": large,
                "status": "completed",
                "output": output[:100].decode() + "…",
                "output_ref": f"sha256:{blob.sha256}",
            },
        ),
    ]
    async with env.store.fenced(execution, claimed.epoch) as tx:
        tx.append(sid, actions)
    await env.hub.notify(sid)
    return sid, small, large


def _output(sid: str, call: str) -> str:
    return f"/v1/sessions/{sid}/tool-calls/{call}/output"


async def test_a_large_tool_output_opens_through_its_tool_call(env: Env) -> None:
    output = ("line of a long tool output\n" * 1000).encode()
    async with env.client(headers=AUTH) as client:
        sid, small, large = await _tool_call_with_output(env, client, output)
        full = await client.get(_output(sid, large))
        assert full.status_code == 200, full.text
        assert full.content == output
        assert full.headers["content-type"] == "text/plain; charset=utf-8"
        assert full.headers["content-security-policy"] == "sandbox"
        # No stored output, an unknown call, another session: nothing to open.
        other = (await client.post("/v1/sessions", json={"title": "o"})).json()["session_id"]
        for path in (_output(sid, small), _output(sid, "call_x"), _output(other, large)):
            assert (await client.get(path)).status_code == 404, path
    async with env.client() as anonymous:
        assert (await anonymous.get(_output(sid, large))).status_code == 401
