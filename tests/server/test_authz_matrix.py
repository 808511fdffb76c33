"""BOLA/BFLA matrix: every route of /openapi.json × every kind of caller × objects of
both workspaces, each cell's outcome predicted by ONE table (`RULES`).

A route the table does not name fails the test: a new route (also one another branch
adds) must say here who may call it. Expected outcomes:
- anonymous, an expired or a revoked token: 401;
- an object of a workspace the caller is not in: 404 `not_found` (existence does not leak);
- a role too low for the route: 403 `insufficient_role`;
- otherwise the route runs: anything but 401/403/404 (a 409 for an intent that lost a
  race with an earlier cell is still "allowed").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from opennua.auth import NEEDS, ROLES
from opennua.store import MembershipRecord

from ._harness import AUTH, Env, serving
from ._world import Objects, World, build_world, ensure_automation, unique

Need = Literal[
    "link",
    "read",
    "act",
    "manage",
    "caller",
    "user",
    "admin_somewhere",
    "manage_hidden",
    "server_admin",
    "signed",
]
Body = dict[str, Any] | Callable[[], dict[str, Any]] | None
TEXT = {"content": [{"type": "text", "text": "hi"}]}
#: An AG-UI run with no new message: it follows the session's latest turn, if any.
AGUI = {"threadId": "thread-matrix", "runId": "run-matrix", "messages": []}


@dataclass(frozen=True)
class Rule:
    """Who may call a route: `read`/`act`/`manage` in the object's workspace; `caller`:
    anyone authenticated; `user`: any user (no agent principal); `admin_somewhere`: an
    admin or owner of some workspace (or a server admin); `manage_hidden`: an admin of
    the object's workspace or a server admin, everybody else gets 404 (another
    principal's token); `server_admin`: a server admin only (people management, in no
    workspace: 403 for everybody else); `link`: the route's
    credential is the download link in its path, whoever calls (the matrix's is not a
    link: 404 for all). A plugin or deployment `{name}` is an object of the workspace that
    published or saved it, like a session. `signed`: no token opens it, only the hook's
    signature (none here: 401 for all)."""

    need: Need
    body: Body = None
    query: tuple[str, ...] = ()
    #: Path parameters that name another object than `Objects.params()` does.
    params: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    #: Re-create what an earlier cell of this route consumed (a removed member, a
    #: deleted secret, schedule or hook).
    prepare: Literal["member", "secret", "automation"] | None = None


RULES: dict[tuple[str, str], Rule] = {
    ("GET", "/v1/sessions"): Rule("read", query=("workspace_id",)),
    ("POST", "/v1/sessions"): Rule("act", body={}, query=("workspace_id",)),
    ("GET", "/v1/sessions/{session_id}"): Rule("read"),
    ("PATCH", "/v1/sessions/{session_id}"): Rule("act", body={"title": "renamed"}),
    ("GET", "/v1/sessions/{session_id}/actions"): Rule("read"),
    ("GET", "/v1/sessions/{session_id}/events"): Rule("read", stream=True),
    ("POST", "/v1/sessions/{session_id}/messages"): Rule("act", body=TEXT),
    ("POST", "/v1/sessions/{session_id}/cancel"): Rule("act", body={}),
    ("POST", "/v1/sessions/{session_id}/input-requests/{request_id}/answer"): Rule(
        "act", body={"option_id": "allow"}
    ),
    ("POST", "/v1/sessions/{session_id}/turns/{turn_id}/retry"): Rule("act", body={}),
    ("GET", "/v1/sessions/{session_id}/tool-calls/{tool_call_id}/output"): Rule("read"),
    ("GET", "/v1/sessions/{session_id}/file-changes/{change_id}/diff"): Rule("read"),
    # A chat bridge reports deliveries as a client acting in the session.
    ("POST", "/v1/sessions/{session_id}/deliveries/{delivery_id}"): Rule(
        "act", body={"channel": "matrix", "target": "!r:hs", "kind": "message", "status": "pending"}
    ),
    ("GET", "/v1/executions/{execution_id}"): Rule("read"),
    ("GET", "/v1/artifacts/{artifact_id}"): Rule("read"),
    ("GET", "/v1/artifacts/{artifact_id}/content"): Rule("read"),
    ("POST", "/v1/sessions/{session_id}/artifacts/{artifact_id}/retry"): Rule("act"),
    ("POST", "/v1/artifacts/{artifact_id}/links"): Rule("read"),
    # The link is the credential: a token (or none) never opens a link that is not one.
    ("GET", "/v1/downloads/{link}"): Rule("link", params={"link": "download_link"}),
    ("GET", "/v1/usage"): Rule("read", query=("workspace_id",)),
    ("GET", "/v1/usage/series"): Rule("read", query=("workspace_id",)),
    ("GET", "/v1/whoami"): Rule("caller"),
    ("GET", "/v1/workspaces"): Rule("caller"),
    ("POST", "/v1/workspaces"): Rule("user", body=lambda: {"name": unique("ws")}),
    ("GET", "/v1/workspaces/{workspace_id}/members"): Rule("read"),
    ("GET", "/v1/workspaces/{workspace_id}/people"): Rule("read"),
    ("PUT", "/v1/workspaces/{workspace_id}/members/{principal_id}"): Rule(
        "manage", body={"role": "viewer"}
    ),
    ("DELETE", "/v1/workspaces/{workspace_id}/members/{principal_id}"): Rule(
        "manage", prepare="member"
    ),
    ("POST", "/v1/workspaces/{workspace_id}/agent-principals"): Rule(
        "manage", body=lambda: {"name": unique("agent")}
    ),
    ("POST", "/v1/agent-principals/{principal_id}/disable"): Rule(
        "manage", params={"principal_id": "disposable_agent_id"}
    ),
    ("GET", "/v1/users"): Rule("admin_somewhere"),
    # Server-level people management: server admins only (issue 29).
    ("POST", "/v1/users"): Rule("server_admin", body=lambda: {"name": unique("user")}),
    ("POST", "/v1/users/{principal_id}/disable"): Rule(
        "server_admin", params={"principal_id": "disposable_user_id"}
    ),
    ("GET", "/v1/principals"): Rule("server_admin"),
    ("PUT", "/v1/admins/{principal_id}"): Rule("server_admin"),
    ("DELETE", "/v1/admins/{principal_id}"): Rule("server_admin"),
    ("POST", "/v1/tokens"): Rule("caller", body={}),
    ("GET", "/v1/tokens"): Rule("caller"),
    ("DELETE", "/v1/tokens/{token_id}"): Rule("manage_hidden"),
    # A workspace's admins see its members' tokens and revoke them for its work.
    ("GET", "/v1/workspaces/{workspace_id}/tokens"): Rule("manage"),
    ("DELETE", "/v1/workspaces/{workspace_id}/tokens/{token_id}"): Rule("manage"),
    # Each workspace's own plugin (0.1.0) and a deployment of the same name on it.
    ("GET", "/v1/plugins"): Rule("read", query=("workspace_id",)),
    ("GET", "/v1/plugins/{name}"): Rule("read"),
    ("GET", "/v1/plugins/{name}/versions/{version}"): Rule("read"),
    ("GET", "/v1/plugins/{name}/versions/{version}/contents"): Rule("read"),
    ("GET", "/v1/deployments"): Rule("read", query=("workspace_id",)),
    ("GET", "/v1/deployments/{name}"): Rule("read"),
    ("POST", "/v1/plugin-files/missing"): Rule(
        "manage", body={"sha256": []}, query=("workspace_id",)
    ),
    ("POST", "/v1/plugin-files"): Rule("manage", body={}, query=("workspace_id",)),
    ("POST", "/v1/plugins"): Rule("manage", body={"files": {}}, query=("workspace_id",)),
    ("POST", "/v1/plugins/{name}/channels/{channel}/release"): Rule(
        "manage", body={"version": "0.1.0"}
    ),
    ("POST", "/v1/plugins/{name}/channels/{channel}/rollback"): Rule("manage"),
    # A workspace's secrets (named as `{name}` is here): names for readers, values for nobody.
    ("GET", "/v1/secrets"): Rule("read", query=("workspace_id",)),
    ("PUT", "/v1/secrets/{name}"): Rule("manage", body={"value": "v"}, query=("workspace_id",)),
    ("DELETE", "/v1/secrets/{name}"): Rule("manage", query=("workspace_id",), prepare="secret"),
    # The gateway's audit of a workspace: its admins.
    ("GET", "/v1/audit"): Rule("manage", query=("workspace_id",)),
    ("PUT", "/v1/deployments/{name}"): Rule(
        "manage", body={"plugin": "default", "model": "scripted:demo"}
    ),
    # Schedules and hooks run work as a deployment's principal: managing them is `manage`.
    ("GET", "/v1/schedules"): Rule("read", query=("workspace_id",)),
    ("POST", "/v1/schedules"): Rule(
        "manage",
        body=lambda: {"name": unique("s"), "cron": "0 0 1 1 *", "prompt": "yearly"},
        query=("workspace_id",),
    ),
    ("GET", "/v1/schedules/{schedule_id}"): Rule("read"),
    ("GET", "/v1/schedules/{schedule_id}/runs"): Rule("read"),
    ("POST", "/v1/schedules/{schedule_id}/pause"): Rule("manage"),
    ("POST", "/v1/schedules/{schedule_id}/resume"): Rule("manage"),
    ("DELETE", "/v1/schedules/{schedule_id}"): Rule("manage", prepare="automation"),
    ("GET", "/v1/hooks"): Rule("read", query=("workspace_id",)),
    ("GET", "/v1/hooks/{hook_id}/deliveries"): Rule("read", prepare="automation"),
    ("POST", "/v1/hooks"): Rule(
        "manage", body=lambda: {"name": unique("h"), "prompt": "p"}, query=("workspace_id",)
    ),
    ("DELETE", "/v1/hooks/{hook_id}"): Rule("manage", prepare="automation"),
    ("POST", "/v1/hooks/{hook_id}"): Rule("signed", body={}),
    # Subscriptions send the workspace's actions out of it: managing them is `manage`.
    ("GET", "/v1/subscriptions"): Rule("read", query=("workspace_id",)),
    ("POST", "/v1/subscriptions"): Rule(
        "manage",
        body={"url": "https://example.org/hooks", "events": ["turn.ended"]},
        query=("workspace_id",),
    ),
    ("GET", "/v1/subscriptions/{subscription_id}"): Rule("read", prepare="automation"),
    ("GET", "/v1/subscriptions/{subscription_id}/deliveries"): Rule("read", prepare="automation"),
    # A replay from a seq without its session: 422 once the caller may (nothing is queued).
    ("POST", "/v1/subscriptions/{subscription_id}/replay"): Rule(
        "manage", body={"from_seq": 1}, prepare="automation"
    ),
    ("DELETE", "/v1/subscriptions/{subscription_id}"): Rule("manage", prepare="automation"),
    # AG-UI runs act in a session: the deployment's (the thread maps to one in the
    # workspace the query names) or the one the path names.
    ("POST", "/v1/agui/{deployment}"): Rule(
        "act", body=AGUI, query=("workspace_id",), params={"deployment": "plugin"}, stream=True
    ),
    ("POST", "/v1/agui/sessions/{session_id}"): Rule("act", body=AGUI, stream=True),
    # A deployment's A2A card and JSON-RPC binding (docs/protocols.md): reading a task is
    # `read` (a JSON-RPC error for an unknown one is still "allowed"); sending needs `act`.
    ("GET", "/v1/a2a/{name}/.well-known/agent-card.json"): Rule("read"),
    ("POST", "/v1/a2a/{name}"): Rule(
        "read", body={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "exe_x"}}
    ),
}

CALLERS = (
    "owner",
    "admin",
    "member",
    "viewer",
    "other",
    "agent",
    "anonymous",
    "expired",
    "revoked",
)
_RANK = {role: i for i, role in enumerate(ROLES)}
Outcome = Literal["allowed", "401", "403", "404"]


def expected(rule: Rule, caller: str, world: World, workspace: str) -> Outcome:
    """The one prediction every cell is held to."""
    if rule.need == "link":
        return "404"
    if caller in ("anonymous", "expired", "revoked") or rule.need == "signed":
        return "401"
    roles = world.roles[caller]
    if rule.need == "caller":
        return "allowed"
    if rule.need == "user":
        return "403" if world.kinds.get(caller) == "agent" else "allowed"
    server_admin = caller in world.server_admins
    if rule.need == "server_admin":
        return "allowed" if server_admin else "403"
    if rule.need == "admin_somewhere":
        admin = any(_RANK[r] >= _RANK["admin"] for r in roles.values())
        return "allowed" if admin or server_admin else "403"
    role = roles.get(workspace)
    if rule.need == "manage_hidden":
        manages = role is not None and _RANK[role] >= _RANK["admin"]
        return "allowed" if manages or server_admin else "404"
    if role is None:
        return "404"
    return "allowed" if _RANK[role] >= _RANK[NEEDS[rule.need]] else "403"


def _outcome(response: httpx.Response) -> tuple[Outcome | str, str | None]:
    code = None
    if response.headers.get("content-type", "").startswith("application/problem+json"):
        code = response.json().get("code")
    if response.status_code == 401:
        return "401", code
    if response.status_code == 403:
        return ("403" if code == "insufficient_role" else f"403:{code}"), code
    if response.status_code == 404:
        return ("404" if code == "not_found" else f"404:{code}"), code
    return "allowed", code


async def _prepare(rule: Rule, env: Env, objects: Objects) -> None:
    if rule.prepare == "member":
        # The member an earlier cell removed comes back (through the store: no caller).
        membership = MembershipRecord(
            workspace_id=objects.workspace_id,
            principal_id=objects.target_id,
            role="member",
            created_at=0.0,
        )
        await env.store.set_membership(membership)
        env.authority.forget()
    if rule.prepare == "automation":
        await ensure_automation(env, objects)
        env.authority.forget()
    if rule.prepare == "secret":
        # The secret an earlier cell deleted comes back (through the store: no caller).
        # Under the name the cell's path uses (`{name}` is the workspace's plugin name).
        name = objects.params()["name"]
        await env.app.state.context.secrets.put(objects.workspace_id, name, "matrix-value")


def _routes(schema: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, item in schema["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    ]


async def _call(
    c: httpx.AsyncClient, method: str, path: str, rule: Rule, token: str | None, objects: Objects
) -> httpx.Response:
    params = objects.params()
    for name, attribute in rule.params.items():
        params[name] = getattr(objects, attribute)
    url = path.format(**params)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    query = {name: params[name] for name in rule.query}
    body = rule.body() if callable(rule.body) else rule.body
    if rule.stream:
        async with c.stream(method, url, headers=headers, params=query, json=body) as response:
            if response.headers.get("content-type", "").startswith("application/problem+json"):
                await response.aread()
            return response
    return await c.request(method, url, headers=headers, params=query, json=body)


@pytest.mark.slow
async def test_every_route_refuses_exactly_whom_the_table_says(env: Env) -> None:
    async with (
        serving(env.app) as address,
        httpx.AsyncClient(base_url=f"http://{address}", timeout=20) as c,
    ):
        world = await build_world(env, c)
        schema = (await c.get("/openapi.json", headers=AUTH)).json()
        routes = _routes(schema)
        unknown = [r for r in routes if r not in RULES]
        assert not unknown, f"routes the matrix does not know (add them to RULES): {unknown}"
        assert set(RULES) <= set(routes), set(RULES) - set(routes)
        wrong = []
        cells = 0
        assert world.a is not None and world.b is not None
        for method, path in routes:
            rule = RULES[(method, path)]
            for objects in (world.a, world.b):
                for caller in CALLERS:
                    await _prepare(rule, env, objects)
                    response = await _call(c, method, path, rule, world.tokens[caller], objects)
                    want = expected(rule, caller, world, objects.workspace_id)
                    got, _ = _outcome(response)
                    cells += 1
                    if (method, path) == ("POST", "/v1/workspaces") and got == "allowed":
                        # Its creator owns it: from now on they are an owner somewhere.
                        world.roles[caller][response.json()["workspace_id"]] = "owner"
                    if got != want:
                        which = "A" if objects is world.a else "B"
                        wrong.append(
                            f"{method} {path} as {caller} on {which}: "
                            f"want {want}, got {response.status_code} {got}"
                        )
        assert cells == len(routes) * 2 * len(CALLERS)
        assert not wrong, f"{len(wrong)} of {cells} cells wrong:\n" + "\n".join(wrong)


async def test_the_websocket_lets_a_viewer_read_and_refuses_their_intents(env: Env) -> None:
    """WebSocket routes are not in /openapi.json: the same rules, checked here."""
    async with (
        serving(env.app) as address,
        httpx.AsyncClient(base_url=f"http://{address}", timeout=20) as c,
    ):
        world = await build_world(env, c)
        assert world.a is not None
        url = f"ws://{address}/v1/sessions/{world.a.session_id}/ws"
        intent = {"type": "cancel", "intent_id": "int_ws_viewer", "client_id": "cli_v"}
        bearer = {"Authorization": f"Bearer {world.tokens['viewer']}"}
        async with connect(url, additional_headers=bearer) as ws:
            await ws.send(json.dumps(intent))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if frame.get("type") == "result":
                    break
        assert frame["result"]["type"] == "rejected"
        assert frame["result"]["code"] == "insufficient_role"
        # A member of the other workspace learns nothing: the same close as an unknown id.
        other = {"Authorization": f"Bearer {world.tokens['other']}"}
        async with connect(url, additional_headers=other) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4404
