"""People on a shared server (issue 29): server admins create, list and disable people;
a workspace's owners and admins revoke their members' tokens for that workspace's work;
agent-principal names belong to their workspace; login cookies and download links are
MACed with the server's secret; a login comes from this server's own pages."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import httpx
import pytest

from opennua.auth import Authority
from opennua.auth._tokens import secret_hash, split

from ._harness import AUTH, TOKEN, Env
from ._world import add_user

PROBLEM = "application/problem+json"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _code(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    code: str = response.json()["code"]
    return code


async def _workspace(c: httpx.AsyncClient, headers: dict[str, str] = AUTH) -> str:
    workspace: str = (await c.get("/v1/whoami", headers=headers)).json()["workspaces"][0][
        "workspace_id"
    ]
    return workspace


async def test_only_a_server_admin_creates_people_and_sees_them_all(env: Env) -> None:
    async with env.client() as c:
        me = (await c.get("/v1/whoami", headers=AUTH)).json()
        assert me["server_admin"] is True  # the first owner is one
        a = me["workspaces"][0]["workspace_id"]
        _, viewer = await add_user(c, AUTH, a, "viewer")
        _, nobody = await add_user(c, AUTH, a, "viewer")
        nobody_id = (await c.get("/v1/whoami", headers=_bearer(nobody))).json()["principal_id"]
        await c.delete(f"/v1/workspaces/{a}/members/{nobody_id}", headers=AUTH)
        # A viewer, or a user with no membership, who opens a workspace of their own
        # becomes "admin somewhere" there, and still may not create people.
        for token in (viewer, nobody):
            own = await c.post(
                "/v1/workspaces", json={"name": f"own-{token[-6:]}"}, headers=_bearer(token)
            )
            assert own.status_code == 201, own.text
            made = await c.post("/v1/users", json={"name": "sock-puppet"}, headers=_bearer(token))
            assert _code(made, 403) == "insufficient_role"
            assert _code(await c.get("/v1/principals", headers=_bearer(token)), 403) == (
                "insufficient_role"
            )
        # The server admin sees every principal: people added anywhere, agent principals.
        agent = await c.post(
            f"/v1/workspaces/{a}/agent-principals", json={"name": "bot"}, headers=AUTH
        )
        everyone = (await c.get("/v1/principals", headers=AUTH)).json()["items"]
        assert {p["principal_id"] for p in everyone} >= {
            nobody_id,
            agent.json()["principal_id"],
            me["principal_id"],
        }
        users = (await c.get("/v1/principals", params={"kind": "user"}, headers=AUTH)).json()
        assert {p["kind"] for p in users["items"]} == {"user"}
        listed = (await c.get("/v1/users", headers=AUTH)).json()["items"]
        assert nobody_id in {u["principal_id"] for u in listed}  # not in any workspace of ours


async def test_server_admins_are_granted_revoked_and_never_none(env: Env) -> None:
    async with env.client() as c:
        a = await _workspace(c)
        alice_id, alice = await add_user(c, AUTH, a, "member")
        owner_id = (await c.get("/v1/whoami", headers=AUTH)).json()["principal_id"]
        assert _code(await c.delete(f"/v1/admins/{owner_id}", headers=AUTH), 409) == (
            "last_server_admin"
        )
        granted = await c.put(f"/v1/admins/{alice_id}", headers=AUTH)
        assert granted.status_code == 200 and granted.json()["server_admin"] is True
        # At once: alice now creates people, and demotes the first owner.
        assert (await c.post("/v1/users", json={"name": "bob"}, headers=_bearer(alice))).is_success
        demoted = await c.delete(f"/v1/admins/{owner_id}", headers=_bearer(alice))
        assert demoted.status_code == 200 and demoted.json()["server_admin"] is False
        assert _code(await c.post("/v1/users", json={"name": "eve"}, headers=AUTH), 403) == (
            "insufficient_role"
        )
        # An agent principal is no person, and an unknown id is nobody.
        bot = (
            await c.post(f"/v1/workspaces/{a}/agent-principals", json={"name": "b"}, headers=AUTH)
        ).json()["principal_id"]
        assert _code(await c.put(f"/v1/admins/{bot}", headers=_bearer(alice)), 404) == "not_found"
        assert _code(await c.put("/v1/admins/prn_nobody", headers=_bearer(alice)), 404) == (
            "not_found"
        )


async def test_a_server_admin_disables_a_person_everywhere(env: Env) -> None:
    async with env.client() as c:
        a = await _workspace(c)
        bob_id, bob = await add_user(c, AUTH, a, "admin")
        other = (await c.post("/v1/workspaces", json={"name": "bobs"}, headers=_bearer(bob))).json()
        second = (await c.post("/v1/tokens", json={}, headers=_bearer(bob))).json()["token"]
        assert (await c.get("/v1/whoami", headers=_bearer(second))).status_code == 200
        # A workspace admin may not; a server admin may.
        _, carol = await add_user(c, AUTH, a, "admin")
        assert (
            _code(await c.post(f"/v1/users/{bob_id}/disable", headers=_bearer(carol)), 403)
            == "insufficient_role"
        )
        disabled = await c.post(f"/v1/users/{bob_id}/disable", headers=AUTH)
        assert disabled.status_code == 200 and disabled.json()["disabled"] is True
        for token in (bob, second):  # every token, in every workspace (his own too)
            for path in ("/v1/whoami", f"/v1/workspaces/{other['workspace_id']}/members"):
                assert _code(await c.get(path, headers=_bearer(token)), 401) == (
                    "principal_disabled"
                )
        owner_id = (await c.get("/v1/whoami", headers=AUTH)).json()["principal_id"]
        assert _code(await c.post(f"/v1/users/{owner_id}/disable", headers=AUTH), 409) == (
            "last_server_admin"
        )
        bot = (
            await c.post(f"/v1/workspaces/{a}/agent-principals", json={"name": "b"}, headers=AUTH)
        ).json()["principal_id"]
        assert _code(await c.post(f"/v1/users/{bot}/disable", headers=AUTH), 404) == "not_found"


async def test_workspace_admins_revoke_their_members_tokens_for_their_workspace_only(
    env: Env,
) -> None:
    async with env.client() as c:
        a = await _workspace(c)
        _, admin = await add_user(c, AUTH, a, "admin")
        _, dana = await add_user(c, AUTH, a, "member")
        b = (await c.post("/v1/workspaces", json={"name": "danas"}, headers=_bearer(dana))).json()[
            "workspace_id"
        ]
        dana_token = split(dana)[0]
        # Before: the owner's DELETE /v1/tokens on another person's token was 404, and
        # still is for a workspace admin (that token may open other workspaces).
        assert _code(await c.delete(f"/v1/tokens/{dana_token}", headers=_bearer(admin)), 404) == (
            "not_found"
        )
        listed = (await c.get(f"/v1/workspaces/{a}/tokens", headers=_bearer(admin))).json()
        assert dana_token in {t["token_id"] for t in listed["items"]}
        assert all("token" not in t and "secret_hash" not in t for t in listed["items"])
        revoked = await c.delete(f"/v1/workspaces/{a}/tokens/{dana_token}", headers=_bearer(admin))
        assert revoked.status_code == 200, revoked.text
        assert (
            revoked.json()["revoked_here_at"] is not None and revoked.json()["revoked_at"] is None
        )
        # Dana's token opens nothing in A any more, and still opens her own workspace.
        assert _code(await c.get(f"/v1/workspaces/{a}/members", headers=_bearer(dana)), 404) == (
            "not_found"
        )
        assert (await c.get(f"/v1/workspaces/{b}/members", headers=_bearer(dana))).is_success
        who = (await c.get("/v1/whoami", headers=_bearer(dana))).json()
        assert [w["workspace_id"] for w in who["workspaces"]] == [b]
        # An admin may not revoke an owner's token; nobody revokes a stranger's here.
        owner_token = split(TOKEN)[0]
        assert (
            _code(
                await c.delete(f"/v1/workspaces/{a}/tokens/{owner_token}", headers=_bearer(admin)),
                403,
            )
            == "insufficient_role"
        )
        _, stranger = await add_user(c, _bearer(dana), b, "member")
        assert (
            _code(
                await c.delete(
                    f"/v1/workspaces/{a}/tokens/{split(stranger)[0]}", headers=_bearer(admin)
                ),
                404,
            )
            == "not_found"
        )
        # A server admin revokes anybody's token, everywhere.
        assert (await c.delete(f"/v1/tokens/{dana_token}", headers=AUTH)).status_code == 200
        assert _code(await c.get("/v1/whoami", headers=_bearer(dana)), 401) == "token_revoked"


async def test_agent_principal_names_are_their_workspaces_own(env: Env) -> None:
    async with env.client() as c:
        a = await _workspace(c)
        b = (await c.post("/v1/workspaces", json={"name": "b"}, headers=AUTH)).json()[
            "workspace_id"
        ]
        for workspace in (a, b):
            made = await c.post(
                f"/v1/workspaces/{workspace}/agent-principals", json={"name": "bot"}, headers=AUTH
            )
            assert made.status_code == 201, made.text  # no 409 oracle across workspaces
        again = await c.post(
            f"/v1/workspaces/{a}/agent-principals", json={"name": "bot"}, headers=AUTH
        )
        assert _code(again, 409) == "already_exists"


# -- cookies, links, login ---------------------------------------------------------------------


async def test_a_database_reader_cannot_forge_a_login_cookie(env: Env) -> None:
    """The cookie was MACed with the token's stored hash, which a reader of the token table
    has; now with a key derived from the server's secret, which no database holds."""
    record = await env.store.get_token(split(TOKEN)[0])
    assert record.secret_hash == secret_hash(split(TOKEN)[1])
    expires = str(int(env.clock()) + 3600)
    old_key = hashlib.sha256(f"opennua-cookie\x1f{record.secret_hash}".encode()).digest()
    mac = hmac.new(old_key, f"{record.token_id}.{expires}".encode(), hashlib.sha256).hexdigest()
    async with env.client() as c:
        c.cookies.set("nua_session_80", f"{record.token_id}.{expires}.{mac}")
        assert _code(await c.get("/v1/whoami"), 401) == "unauthorized"
        # A cookie the server issued works, on another host sharing the secret too.
        login = await c.get("/login", params={"token": TOKEN})
        assert login.status_code == 303
        assert (await c.get("/v1/whoami")).status_code == 200
    cookie = login.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    same = Authority(env.store, secret_key=b"k" * 32)
    other = Authority(env.store, secret_key=b"j" * 32)
    issued = await same.issue_cookie(TOKEN, 60)
    assert (await Authority(env.store, secret_key=b"k" * 32).authenticate_cookie(issued)).name
    with pytest.raises(Exception, match="not valid"):
        await other.authenticate_cookie(issued)
    assert cookie != issued


async def test_a_database_reader_cannot_forge_a_download_link(env: Env) -> None:
    authority = Authority(env.store, secret_key=b"k" * 32)
    record = await env.store.get_token(split(TOKEN)[0])
    owner = await authority.authenticate(TOKEN)
    payload = (
        base64.urlsafe_b64encode(
            json.dumps(
                [record.token_id, owner.principal_id, "art_x", int(env.clock()) + 60, "n" * 32],
                separators=(",", ":"),
            ).encode()
        )
        .decode()
        .rstrip("=")
    )
    old_key = hashlib.sha256(f"opennua-download\x1f{record.secret_hash}".encode()).digest()
    forged = f"{payload}.{hmac.new(old_key, payload.encode(), hashlib.sha256).hexdigest()}"
    with pytest.raises(Exception, match="no such download link"):
        await authority.redeem_download_link(forged)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "https://evil.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Origin": "http://testserver"}, 303),
        ({}, 303),  # no browser at all (curl): nothing to forge
    ],
)
async def test_a_login_form_post_must_come_from_here(
    env: Env, headers: dict[str, str], status: int
) -> None:
    async with env.client() as c:
        posted = await c.post("/login", data={"token": TOKEN}, headers=headers)
        assert posted.status_code == status, posted.text
        assert ("set-cookie" in posted.headers) is (status == 303)


async def test_the_printed_login_link_is_refused_when_another_site_sends_it(env: Env) -> None:
    async with env.client() as c:
        cross = await c.get(
            "/login", params={"token": TOKEN}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert cross.status_code == 403 and "set-cookie" not in cross.headers
        opened = await c.get("/login", params={"token": TOKEN}, headers={"Sec-Fetch-Site": "none"})
        assert opened.status_code == 303
