"""Two workspaces with people, an agent principal and objects in each, built through the
API (and, where only the Supervisor could make an object, through the store)."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from opennua.host import DeploymentSpec, Scope
from opennua.plugins import scaffold_plugin
from opennua.protocol import action_id, timestamp
from opennua.store import (
    ArtifactRecord,
    HookRecord,
    NotFound,
    PluginFile,
    ScheduleRecord,
    SubscriptionRecord,
    WriteConflict,
)

from ._harness import AUTH, TOKEN, Env, park_for_input

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


@dataclass
class Objects:
    """One workspace's objects, named as the OpenAPI path parameters name them."""

    workspace_id: str
    session_id: str = ""
    execution_id: str = ""
    turn_id: str = ""
    request_id: str = ""
    artifact_id: str = ""
    change_id: str = ""
    #: Not a download link: what the link route answers to any caller.
    download_link: str = "not-a-link"
    tool_call_id: str = ""
    #: A member whose role the matrix changes and removes (re-added before each cell).
    target_id: str = ""
    #: An agent principal the matrix disables, and one whose token it revokes.
    disposable_agent_id: str = ""
    #: A member the matrix disables (server admins may), and only that.
    disposable_user_id: str = ""
    agent_token_id: str = ""
    schedule_id: str = ""
    hook_id: str = ""
    subscription_id: str = ""
    #: A plugin published in this workspace, and a deployment of the same name on it.
    plugin: str = ""

    def params(self) -> dict[str, str]:
        return {
            "workspace_id": self.workspace_id,
            "session_id": self.session_id,
            "execution_id": self.execution_id,
            "turn_id": self.turn_id,
            "request_id": self.request_id,
            "artifact_id": self.artifact_id,
            "tool_call_id": self.tool_call_id,
            "change_id": self.change_id,
            "principal_id": self.target_id,
            "token_id": self.agent_token_id,
            "schedule_id": self.schedule_id,
            "hook_id": self.hook_id,
            "subscription_id": self.subscription_id,
            "delivery_id": "dlv_matrix",
            "name": self.plugin,
            "version": "0.1.0",
            "channel": "matrix",
        }


@dataclass
class World:
    #: principal label -> bearer token (None: anonymous).
    tokens: dict[str, str | None] = field(default_factory=dict)
    #: The server admins among them (the first owner).
    server_admins: set[str] = field(default_factory=lambda: {"owner"})
    #: principal label -> {workspace_id: role}.
    roles: dict[str, dict[str, str]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    a: Objects | None = None
    b: Objects | None = None


async def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code < 300, response.text
    body: dict[str, Any] = response.json() if response.content else {}
    return body


async def add_user(
    c: httpx.AsyncClient, owner: dict[str, str], workspace: str, role: str
) -> tuple[str, str]:
    """`(principal_id, token)` of a new user (the server admin creates people) whom
    `owner` gives `role` in `workspace`."""
    user = await _ok(await c.post("/v1/users", json={"name": unique("user")}, headers=AUTH))
    await _ok(
        await c.put(
            f"/v1/workspaces/{workspace}/members/{user['principal_id']}",
            json={"role": role},
            headers=owner,
        )
    )
    return user["principal_id"], user["token"]


async def _objects(
    env: Env, c: httpx.AsyncClient, owner: dict[str, str], workspace: str
) -> Objects:
    objects = Objects(workspace)
    created = await _ok(
        await c.post("/v1/sessions", params={"workspace_id": workspace}, json={}, headers=owner)
    )
    objects.session_id = sid = created["session_id"]
    sent = await _ok(
        await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"content": [{"type": "text", "text": "hi"}]},
            headers=owner,
        )
    )
    objects.execution_id, objects.turn_id = sent["execution_id"], sent["turn_id"]
    objects.request_id = await park_for_input(
        env,
        sid,
        objects.execution_id,
        objects.turn_id,
        options=[{"option_id": "allow", "name": "Allow", "kind": "allow_once"}],
    )
    # A tool call with its output stored by reference, and an artifact.
    ref = await env.store.blobs.put(b"output of a tool")
    objects.tool_call_id = f"call_{hashlib.sha256(sid.encode()).hexdigest()[:20]}"
    now = timestamp(env.clock())

    def action(key: str, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "v": 1,
            "session_id": sid,
            "id": action_id(objects.execution_id, key),
            "type": type_,
            "ts": now,
            "turn_id": objects.turn_id,
            "data": data,
        }

    await env.store.append(
        sid,
        [
            action(
                "tool/started",
                "tool_call.started",
                {
                    "tool_call_id": objects.tool_call_id,
                    "name": "shell",
                    "title": "shell",
                    "kind": "execute",
                    "input": {},
                },
            ),
            action(
                "tool/updated",
                "tool_call.updated",
                {
                    "tool_call_id": objects.tool_call_id,
                    "status": "completed",
                    "output_ref": f"blob:{ref.sha256}",
                },
            ),
        ],
    )
    objects.artifact_id = f"art_{hashlib.sha256(sid.encode()).hexdigest()[:20]}"
    published = {
        "artifact_id": objects.artifact_id,
        "name": "a.txt",
        "media_type": "text/plain",
        "size": ref.size,
        "sha256": ref.sha256,
    }
    changed = {"path": "a.txt", "change": "created", "diff": "--- /dev/null\n+++ b/a.txt\n"}
    await env.store.append(
        sid,
        [
            action("artifact", "artifact.published", published),
            action("file", "file.changed", changed),
        ],
    )
    objects.change_id = action_id(objects.execution_id, "file")
    await env.store.put_artifact(
        ArtifactRecord(
            artifact_id=objects.artifact_id,
            session_id=sid,
            name="a.txt",
            media_type="text/plain",
            size=ref.size,
            sha256=ref.sha256,
            created_at=env.clock(),
        )
    )
    objects.target_id, _ = await add_user(c, owner, workspace, "member")
    objects.disposable_user_id, _ = await add_user(c, owner, workspace, "viewer")
    disposable = await _ok(
        await c.post(
            f"/v1/workspaces/{workspace}/agent-principals",
            json={"name": unique("agent"), "role": "member"},
            headers=owner,
        )
    )
    objects.disposable_agent_id = disposable["principal_id"]
    token = await _ok(
        await c.post("/v1/tokens", json={"principal_id": disposable["principal_id"]}, headers=owner)
    )
    objects.agent_token_id = token["token_id"]
    me = await _ok(await c.get("/v1/whoami", headers=owner))
    objects.plugin = await _plugin(env, Scope(workspace, me["principal_id"]))
    suffix = hashlib.sha256(workspace.encode()).hexdigest()[:20].upper()
    objects.schedule_id, objects.hook_id = f"sch_{suffix}", f"hok_{suffix}"
    objects.subscription_id = f"sub_{suffix}"
    await ensure_automation(env, objects)
    return objects


async def _plugin(env: Env, scope: Scope) -> str:
    """A plugin published in the scope's workspace, released to `stable`, and deployed."""
    name = unique("plugin")
    with tempfile.TemporaryDirectory() as tmp:
        plugin = scaffold_plugin(Path(tmp) / name, name)
        files = []
        registry = env.host.registry
        for f in plugin.files:
            await registry.files.upload(_stream((Path(tmp) / name / f.path).read_bytes()), scope)
            files.append(
                PluginFile(path=f.path, sha256=f.sha256, size=f.size, executable=f.executable)
            )
    version = (await registry.publish(files, scope=scope)).version.version
    assert version == "0.1.0", version  # the release route's body names it
    await registry.release(name, "stable", version, scope)
    spec = DeploymentSpec(plugin=name, model="scripted:demo")
    await registry.deploy(name, spec, scope)
    return name


async def _stream(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def ensure_automation(env: Env, objects: Objects) -> None:
    """The workspace's schedule and hook (again, after a cell deleted them)."""
    schedule = ScheduleRecord(
        schedule_id=objects.schedule_id,
        workspace_id=objects.workspace_id,
        name=f"matrix-{objects.schedule_id}",
        cron="0 0 1 1 *",
        timezone="UTC",
        deployment="default",
        prompt="yearly",
        misfire="skip",
        created_by="prn_matrix",
        created_at=env.clock(),
        next_fire_at=env.clock() + 3600,
    )
    hook = HookRecord(
        hook_id=objects.hook_id,
        workspace_id=objects.workspace_id,
        name=f"matrix-{objects.hook_id}",
        deployment="default",
        prompt="{{ payload }}",
        secret_name=f"hook.{objects.hook_id}",
        max_bytes=1024,
        created_by="prn_matrix",
        created_at=env.clock(),
    )
    for create in (env.store.create_schedule(schedule), env.store.create_hook(hook)):
        with contextlib.suppress(WriteConflict):
            await create
    subscription = SubscriptionRecord(
        subscription_id=objects.subscription_id,
        workspace_id=objects.workspace_id,
        url="https://example.org/hooks",
        events=("turn.ended",),
        secret_name=f"subscription.{objects.subscription_id}",
        created_by="prn_matrix",
        created_at=env.clock(),
    )
    with contextlib.suppress(NotFound):
        await env.store.get_subscription(objects.subscription_id)
        return
    await env.store.create_subscription(subscription)


async def build_world(env: Env, c: httpx.AsyncClient) -> World:
    """owner/admin/member/viewer of A, a member of B ("other"), an agent principal of A,
    anonymous, and a member of A's expired and revoked tokens; objects in A and B."""
    world = World()
    me = await _ok(await c.get("/v1/whoami", headers=AUTH))
    a = me["workspaces"][0]["workspace_id"]

    world.tokens["owner"] = TOKEN
    world.roles["owner"] = {a: "owner"}
    for role in ("admin", "member", "viewer"):
        _, token = await add_user(c, AUTH, a, role)
        world.tokens[role] = token
        world.roles[role] = {a: role}
    # Workspace B: its owner builds it (not in the matrix), "other" is a member there.
    _, b_owner_token = await add_user(c, AUTH, a, "viewer")
    b_owner = {"Authorization": f"Bearer {b_owner_token}"}
    b = (await _ok(await c.post("/v1/workspaces", json={"name": unique("ws")}, headers=b_owner)))[
        "workspace_id"
    ]
    _, other = await add_user(c, b_owner, b, "member")
    world.tokens["other"] = other
    world.roles["other"] = {b: "member"}
    agent = await _ok(
        await c.post(
            f"/v1/workspaces/{a}/agent-principals",
            json={"name": unique("agent"), "role": "member"},
            headers=AUTH,
        )
    )
    agent_token = await _ok(
        await c.post("/v1/tokens", json={"principal_id": agent["principal_id"]}, headers=AUTH)
    )
    world.tokens["agent"] = agent_token["token"]
    world.roles["agent"] = {a: "member"}
    world.kinds["agent"] = "agent"
    member = {"Authorization": f"Bearer {world.tokens['member']}"}
    expiring = await _ok(await c.post("/v1/tokens", json={"expires_in": 60}, headers=member))
    revoked = await _ok(await c.post("/v1/tokens", json={}, headers=member))
    await _ok(await c.delete(f"/v1/tokens/{revoked['token_id']}", headers=member))
    world.tokens["expired"] = expiring["token"]
    world.tokens["revoked"] = revoked["token"]
    world.tokens["anonymous"] = None
    world.a = await _objects(env, c, AUTH, a)
    world.b = await _objects(env, c, b_owner, b)
    env.clock.advance(120)  # the expiring token is past its expiry now
    return world
