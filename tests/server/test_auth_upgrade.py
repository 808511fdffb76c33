"""Upgrade: a data directory from before workspaces opens with its sessions in the default
workspace and the old owner token still valid; tokens never leak into logs, error
bodies or the action log."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from pathlib import Path

import httpx
import pytest

from opennua.host import Hub, SessionHost
from opennua.protocol import CreateSession
from opennua.store import open_store

from ._serve_proc import nua_serve

#: What the principals migration adds. Emptied (with the sessions' workspace and principal
#: cleared), a data directory has the data one written before this change had; the schema
#: change itself is the migration's, tested with the others (tests/store/test_migrations.py).
_AUTH_TABLES = ("workspaces", "principals", "memberships", "api_tokens", "execution_grants")


async def _session_without_workspace(data: Path) -> str:
    """What the code before workspaces wrote: a session with no workspace."""
    async with await open_store(f"sqlite:///{data}/nua.db", data_dir=data) as store:
        host = SessionHost(store, Hub(store))
        await host.registry.ensure_builtin("scripted:demo")
        result = await host.submit(
            None, CreateSession(intent_id="int_old", client_id="cli_old", title="old work")
        )
        assert result.type == "accepted"
        return str(result.ids["session_id"])


def _pre_change_data_dir(data: Path) -> tuple[str, str]:
    data.mkdir(mode=0o700)
    sid = asyncio.run(_session_without_workspace(data))
    with sqlite3.connect(data / "nua.db") as conn:
        for table in _AUTH_TABLES:
            conn.execute(f"DELETE FROM {table}")
        conn.execute("UPDATE sessions SET workspace_id = NULL, principal_id = NULL")
    token = secrets.token_urlsafe(32)  # the old owner token's shape: no id, no prefix
    (data / "token").write_text(token + "\n")
    (data / "token").chmod(0o600)
    return sid, token


@pytest.mark.slow
def test_an_old_data_dir_keeps_its_sessions_and_its_owner_token(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sid, token = _pre_change_data_dir(data)
    bearer = {"Authorization": f"Bearer {token}"}
    with nua_serve(data) as served, httpx.Client(base_url=served.url, headers=bearer) as c:
        me = c.get("/v1/whoami").json()
        assert me["name"] == "owner" and me["workspaces"][0]["role"] == "owner"
        workspace = me["workspaces"][0]["workspace_id"]
        listed = c.get("/v1/sessions").json()["items"]
        assert [s["session_id"] for s in listed] == [sid]
        assert c.get(f"/v1/sessions/{sid}").status_code == 200
        members = c.get(f"/v1/workspaces/{workspace}/members").json()["items"]
        assert [m["role"] for m in members] == ["owner"]
        # The secret is stored only as a hash.
        with sqlite3.connect(data / "nua.db") as conn:
            dump = "\n".join(conn.iterdump())
        assert token not in dump
    # A second start neither makes a second workspace nor moves anything.
    with nua_serve(data) as served, httpx.Client(base_url=served.url, headers=bearer) as c:
        assert len(c.get("/v1/workspaces").json()["items"]) == 1


@pytest.mark.slow
def test_tokens_never_reach_logs_error_bodies_or_the_action_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    secrets_seen: list[str] = []
    with nua_serve(data) as served, served.client() as c:
        # (The local owner token is printed once, on purpose, in the login link of the
        # banner `nua serve` shows its operator; every other token must never appear.)
        user = c.post("/v1/users", json={"name": "carol"}).json()
        made = c.post("/v1/tokens", json={"name": "ci"}).json()
        secrets_seen += [user["token"], made["token"]]
        sid = c.post("/v1/sessions", json={"title": "t"}).json()["session_id"]
        c.post(f"/v1/sessions/{sid}/messages", json={"content": [{"type": "text", "text": "x"}]})
        bodies = []
        for bad in (made["token"], made["token"] + "x", "nua.tok_bogus." + "a" * 43):
            bearer = {"Authorization": f"Bearer {bad}"}
            bodies.append(c.get(f"/v1/sessions/{sid}", headers=bearer).text)
        c.delete(f"/v1/tokens/{made['token_id']}")
        bodies.append(
            c.get("/v1/whoami", headers={"Authorization": f"Bearer {made['token']}"}).text
        )
        bodies.append(c.get(f"/login?token={made['token']}", follow_redirects=False).text)
        log = c.get(f"/v1/sessions/{sid}/actions").text
        served_log = served.log_text()
    dump = "\n".join(sqlite3.connect(data / "nua.db").iterdump())
    for secret in secrets_seen:
        part = secret.rsplit(".", 1)[-1]
        for name, text in (("server log", served_log), ("action log", log), ("db", dump)):
            assert part not in text, f"a token's secret is in the {name}"
        for body in bodies:
            assert part not in body, "a token's secret is in an error body"
