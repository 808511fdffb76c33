"""Downloads re-check who asks, every time, and download links open once: a link is bound
to the principal (through the token that asked) and the artifact, short-lived, single-use;
expired or reused it is 410 problem JSON. Real store (SQLite and PostgreSQL), real app."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import httpx

from opennua.auth._links import LINK_TTL
from opennua.store import ArtifactRecord

from ._harness import AUTH, Env
from ._world import add_user

BODY = b"the quarterly report\n"


async def _artifact(env: Env, c: httpx.AsyncClient) -> tuple[str, str]:
    """`(workspace_id, artifact_id)`: an artifact of a session in the owner's workspace."""
    workspace = (await c.get("/v1/whoami", headers=AUTH)).json()["workspaces"][0]["workspace_id"]
    sid = (await c.post("/v1/sessions", json={}, headers=AUTH)).json()["session_id"]
    ref = await env.store.blobs.put(BODY)
    aid = "art_downloads_" + sid[-8:]
    await env.store.put_artifact(
        ArtifactRecord(
            artifact_id=aid,
            session_id=sid,
            name="report.md",
            media_type="text/markdown",
            size=ref.size,
            sha256=ref.sha256,
            created_at=env.clock(),
        )
    )
    return workspace, aid


async def _link(c: httpx.AsyncClient, aid: str, headers: dict[str, str]) -> str:
    r = await c.post(f"/v1/artifacts/{aid}/links", headers=headers)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    assert body["url"].startswith("/v1/downloads/")
    return str(body["url"])


def _problem(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == code, r.json()


async def test_a_link_opens_once_without_a_token_then_is_gone(env: Env) -> None:
    async with env.client() as c:
        _, aid = await _artifact(env, c)
        url = await _link(c, aid, AUTH)
        first = await c.get(url)  # no Authorization, no cookie: the link is the credential
        assert first.status_code == 200 and first.content == BODY
        assert hashlib.sha256(first.content).hexdigest() == first.headers["etag"].strip('"')
        assert first.headers["content-disposition"].startswith("attachment")
        _problem(await c.get(url), 410, "link_used")
        # A fresh link opens again; the first stays spent.
        assert (await c.get(await _link(c, aid, AUTH))).content == BODY
        _problem(await c.get(url), 410, "link_used")


async def test_an_expired_link_is_410(env: Env) -> None:
    async with env.client() as c:
        _, aid = await _artifact(env, c)
        url = await _link(c, aid, AUTH)
        env.clock.advance(LINK_TTL + 1)
        _problem(await c.get(url), 410, "link_expired")


async def test_a_link_is_rechecked_for_its_principal_when_opened(env: Env) -> None:
    async with env.client() as c:
        workspace, aid = await _artifact(env, c)
        pid, token = await add_user(c, AUTH, workspace, "viewer")
        viewer = {"Authorization": f"Bearer {token}"}
        removed = await _link(c, aid, viewer)
        revoked = await _link(c, aid, viewer)
        # Removed from the workspace after asking: the link no longer opens anything.
        r = await c.delete(f"/v1/workspaces/{workspace}/members/{pid}", headers=AUTH)
        assert r.status_code in (200, 204), r.text
        env.authority.forget()
        _problem(await c.get(removed), 404, "not_found")
        # The same holds for the plain download route, on every request.
        _problem(await c.get(f"/v1/artifacts/{aid}/content", headers=viewer), 404, "not_found")
        # Back as a viewer, but the token that asked is revoked: its links are dead too.
        r = await c.put(
            f"/v1/workspaces/{workspace}/members/{pid}", json={"role": "viewer"}, headers=AUTH
        )
        assert r.status_code == 200, r.text
        tokens = (await c.get("/v1/tokens", headers=viewer)).json()["items"]
        for t in tokens:
            await c.delete(f"/v1/tokens/{t['token_id']}", headers=viewer)
        env.authority.forget()
        _problem(await c.get(revoked), 401, "token_revoked")


async def test_an_edited_or_foreign_link_opens_nothing(env: Env) -> None:
    async with env.client() as c:
        _, aid = await _artifact(env, c)
        url = await _link(c, aid, AUTH)
        payload, _, mac = url.removeprefix("/v1/downloads/").partition(".")
        forged = f"/v1/downloads/{payload}.{'0' * len(mac)}"
        _problem(await c.get(forged), 404, "not_found")
        _problem(await c.get("/v1/downloads/not-a-link"), 404, "not_found")
        # A bearer token does not make a bad link good.
        _problem(await c.get(forged, headers=AUTH), 404, "not_found")
        # The untouched link still opens (the forgery did not spend it).
        assert (await c.get(url)).content == BODY
        # Nobody mints a link for an artifact they cannot see.
        _problem(await c.post("/v1/artifacts/art_nope/links", headers=AUTH), 404, "not_found")


async def test_concurrent_uses_of_one_link_open_it_exactly_once(env: Env) -> None:
    async with env.client() as c:
        _, aid = await _artifact(env, c)
        url = await _link(c, aid, AUTH)
        responses = await asyncio.gather(*(c.get(url) for _ in range(8)))
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] + [410] * 7, statuses
        assert all(r.json()["code"] == "link_used" for r in responses if r.status_code == 410)
