"""Read routes the web console needs beside the API's own: who a workspace's members are
(names, kinds, roles), a hook's recent deliveries and refusals, and what a plugin version
contains as the plugin format reads it (skills, sub-agents, servers, settings, what
opennua does not run). Each reads what other modules write; none writes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, JsonValue

from opennua.auth import NEEDS, Permission, Role, allows
from opennua.host import Scope
from opennua.plugins import A2aAgentSpec, McpServerSpec, Plugin
from opennua.protocol import timestamp
from opennua.protocol.intents import NAME_PATTERN

from ._authz import Authorized, Reader
from ._edge import Context, errors_doc, ts

router = APIRouter()
_ERRORS = ("not_found", "validation_error", "unavailable")


class PersonDoc(BaseModel):
    principal_id: str
    kind: Literal["user", "agent"] | None
    name: str | None
    role: Role
    #: What the role allows (the same list `GET …/members` gives).
    permissions: list[Permission]
    disabled: bool
    created_at: str | None


class PeopleDoc(BaseModel):
    items: list[PersonDoc]


@router.get(
    "/v1/workspaces/{workspace_id}/people",
    response_model=PeopleDoc,
    responses=errors_doc(*_ERRORS),
)
async def people(ctx: Context, auth: Reader, workspace_id: str) -> JSONResponse:
    """The workspace's members, people and agent principals, with their names and roles."""
    store = ctx.authority.store
    members = await store.list_memberships(workspace_id=workspace_id)
    principals = {p.principal_id: p for p in await store.list_principals()}
    items = []
    for m in members:
        p = principals.get(m.principal_id)
        items.append(
            {
                "principal_id": m.principal_id,
                "kind": p.kind if p else None,
                "name": p.name if p else None,
                "role": m.role,
                "permissions": [n for n in NEEDS if allows(m.role, n)],
                # Not `created_by`: who made a person may be another workspace's principal.
                "disabled": bool(p and p.disabled_at is not None),
                "created_at": timestamp(p.created_at) if p else None,
            }
        )
    items.sort(key=lambda i: (i["kind"] != "user", str(i["name"]), i["principal_id"]))
    return JSONResponse({"items": items})


class DeliveryDoc(BaseModel):
    delivery_id: str
    received_at: str
    body_sha256: str
    session_id: str
    turn_id: str
    execution_id: str


class RefusalDoc(BaseModel):
    refused_at: str
    #: The problem code the sender got (`bad_signature`, `payload_too_large`, …).
    code: str
    #: The `webhook-id` as sent: unverified when the signature was the problem.
    delivery_id: str | None
    body_bytes: int


class DeliveriesDoc(BaseModel):
    deliveries: list[DeliveryDoc]
    refusals: list[RefusalDoc]


@router.get(
    "/v1/hooks/{hook_id}/deliveries", response_model=DeliveriesDoc, responses=errors_doc(*_ERRORS)
)
async def hook_deliveries(
    ctx: Context,
    auth: Reader,
    hook_id: str,
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
) -> JSONResponse:
    """The hook's newest accepted deliveries (each with the run it started) and its
    newest refused ones (never their payload)."""
    refused = await ctx.automation.refusals(hook_id, limit)
    found = await ctx.store.list_deliveries(hook_id, limit=limit)
    deliveries = [
        {
            "delivery_id": d.delivery_id,
            "received_at": ts(d.received_at),
            "body_sha256": d.body_sha256,
            "session_id": d.session_id,
            "turn_id": d.turn_id,
            "execution_id": d.execution_id,
        }
        for d in found
    ]
    refusals = [
        {
            "refused_at": ts(r.refused_at),
            "code": r.code,
            "delivery_id": r.delivery_id,
            "body_bytes": r.body_bytes,
        }
        for r in refused
    ]
    return JSONResponse({"deliveries": deliveries, "refusals": refusals})


class ContentsDoc(BaseModel):
    name: str
    version: str
    digest: str
    description: str
    skills: list[dict[str, JsonValue]]
    agents: list[dict[str, JsonValue]]
    servers: list[dict[str, JsonValue]]
    settings: dict[str, JsonValue]
    manifest: dict[str, JsonValue]
    #: What opennua does not run, reported rather than dropped (`commands/`, `hooks/`…).
    warnings: list[str]


def _server(s: McpServerSpec) -> dict[str, Any]:
    # Names only: a `.mcp.json` may carry an environment value or a header as written.
    return {
        "name": s.name,
        "kind": "stdio" if s.command is not None else "remote",
        "command": s.command,
        "args": list(s.args),
        "url": s.url,
        "env": sorted(s.env),
        "headers": sorted(s.headers),
        "description": "",
    }


def _agent(a: A2aAgentSpec) -> dict[str, Any]:
    """A `.a2a.json` agent, in the servers' shape: the two share one namespace (a
    deployment's `tools` and `credentials` name either), so a reader sees them together."""
    return {
        "name": a.name,
        "kind": "a2a",
        "command": None,
        "args": [],
        "url": a.url or None,
        "env": [],
        "headers": sorted(a.headers),
        "description": a.description,
    }


def contents_doc(p: Plugin) -> dict[str, Any]:
    access = p.settings.access
    return {
        "name": p.name,
        "version": p.version,
        "digest": p.digest,
        "description": p.description,
        "skills": [
            {
                "name": s.name,
                "description": s.description,
                "path": s.path,
                "body": s.body,
                "resources": list(s.resources),
                "allowed_tools": list(s.allowed_tools),
            }
            for s in p.skills
        ],
        "agents": [
            {
                "name": a.name,
                "description": a.description,
                "path": a.path,
                "instructions": a.instructions,
                "tools": None if a.tools is None else list(a.tools),
                "model": a.model,
            }
            for a in p.agents
        ],
        "servers": [_server(s) for s in p.mcp_servers] + [_agent(a) for a in p.a2a_agents],
        "settings": {
            "instructions_file": p.settings.instructions_file,
            "instructions": p.settings.instructions,
            "allowed_tools": None if access.allowed_tools is None else list(access.allowed_tools),
            "approval_required": list(access.approval_required),
            "egress": None if access.egress is None else list(access.egress),
            "requires_opennua": p.settings.requires_opennua,
        },
        "manifest": dict(p.manifest),
        "warnings": [str(problem) for problem in p.problems],
    }


def _scope(auth: Authorized) -> Scope:
    assert auth.workspace_id is not None  # a registry route always acts in a workspace
    return Scope(auth.workspace_id, auth.caller.principal_id)


@router.get(
    "/v1/plugins/{name}/versions/{version}/contents",
    response_model=ContentsDoc,
    responses=errors_doc(*_ERRORS, "invalid_plugin"),
)
async def plugin_contents(
    ctx: Context,
    auth: Reader,
    name: Annotated[str, Path(pattern=NAME_PATTERN)],
    version: Annotated[str, Path(max_length=128)],
) -> JSONResponse:
    """A published version as the plugin format reads it: its skills, sub-agents, MCP
    servers and A2A agents (environment and header *names* only), its settings and
    warnings."""
    registry = ctx.host.registry
    found = await registry.version(name, version, _scope(auth))
    return JSONResponse(contents_doc(await registry.plugin_of(found)))
