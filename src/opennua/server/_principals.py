"""Who is who: the caller (`whoami`), workspaces and their members (and their tokens),
users and server admins, agent principals and API tokens.

Each route hands the authenticated caller to `opennua.auth.Authority`, which checks the
caller against the object (`Denied` becomes problem JSON in `_app`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from opennua.auth import NEEDS, Permission, Role, allows
from opennua.protocol import timestamp
from opennua.store import MembershipRecord, PrincipalRecord, TokenRecord

from ._authz import Anyone, Manager, Reader, ServerAdmin
from ._edge import BODY_ERRORS, Context, errors_doc, guard_json_body, ts

router = APIRouter()
_BODY = [Depends(guard_json_body)]
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NameBody(_Body):
    name: Name


class RoleBody(_Body):
    role: Role


class AgentBody(_Body):
    name: Name
    role: Role = "member"


class TokenBody(_Body):
    principal_id: Annotated[str, Field(max_length=128)] | None = None
    name: Annotated[str, Field(max_length=100)] | None = None
    #: Seconds until the token expires; none: until revoked.
    expires_in: Annotated[int, Field(ge=60, le=10 * 365 * 24 * 3600)] | None = None


class WorkspaceDoc(BaseModel):
    workspace_id: str
    name: str
    role: Role | None = None


class WorkspaceList(BaseModel):
    items: list[WorkspaceDoc]


class PrincipalDoc(BaseModel):
    principal_id: str
    kind: Literal["user", "agent"]
    name: str
    workspace_id: str | None
    created_by: str | None
    created_at: str
    disabled: bool
    #: A server admin: creates and disables users, sees every principal.
    server_admin: bool


class PrincipalList(BaseModel):
    items: list[PrincipalDoc]


class WhoAmI(BaseModel):
    principal_id: str
    kind: Literal["user", "agent"]
    name: str
    token_id: str
    server_admin: bool
    workspaces: list[WorkspaceDoc]


class MemberDoc(BaseModel):
    workspace_id: str
    principal_id: str
    role: Role
    #: What the role allows, so a client (the chat bridge) never re-derives the policy.
    permissions: list[Permission]


class MemberList(BaseModel):
    items: list[MemberDoc]


class TokenDoc(BaseModel):
    token_id: str
    principal_id: str
    name: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None


class TokenCreated(TokenDoc):
    #: The token itself: shown in this response only, never again.
    token: str


class TokenList(BaseModel):
    items: list[TokenDoc]


class MemberTokenDoc(TokenDoc):
    workspace_id: str
    #: When it was revoked for this workspace's work (it may still open others).
    revoked_here_at: str | None


class MemberTokenList(BaseModel):
    items: list[MemberTokenDoc]


def _principal(p: PrincipalRecord) -> dict[str, Any]:
    return {
        "principal_id": p.principal_id,
        "kind": p.kind,
        "name": p.name,
        "workspace_id": p.workspace_id,
        "created_by": p.created_by,
        "created_at": timestamp(p.created_at),
        "disabled": p.disabled_at is not None,
        "server_admin": p.admin_since is not None,
    }


def _member(m: MembershipRecord) -> dict[str, Any]:
    return {
        "workspace_id": m.workspace_id,
        "principal_id": m.principal_id,
        "role": m.role,
        "permissions": [p for p in NEEDS if allows(m.role, p)],
    }


def _token(t: TokenRecord) -> dict[str, Any]:
    return {
        "token_id": t.token_id,
        "principal_id": t.principal_id,
        "name": t.name,
        "created_at": timestamp(t.created_at),
        "expires_at": ts(t.expires_at),
        "revoked_at": ts(t.revoked_at),
    }


_ERRORS = ("not_found", "unavailable")
_WRITE_ERRORS = (*BODY_ERRORS, *_ERRORS, "already_exists")


@router.get("/v1/whoami", response_model=WhoAmI, responses=errors_doc(*_ERRORS))
async def whoami(ctx: Context, auth: Anyone) -> JSONResponse:
    caller = auth.caller
    workspaces = {w.workspace_id: w for w in await ctx.authority.store.list_workspaces()}
    return JSONResponse(
        {
            "principal_id": caller.principal_id,
            "kind": caller.kind,
            "name": caller.name,
            "token_id": caller.token_id,
            "server_admin": caller.server_admin,
            "workspaces": [
                {"workspace_id": wid, "name": workspaces[wid].name, "role": role}
                for wid, role in caller.roles.items()
                if wid in workspaces
            ],
        }
    )


@router.get("/v1/workspaces", response_model=WorkspaceList, responses=errors_doc(*_ERRORS))
async def list_workspaces(ctx: Context, auth: Anyone) -> JSONResponse:
    roles = auth.caller.roles
    items = [
        {"workspace_id": w.workspace_id, "name": w.name, "role": roles[w.workspace_id]}
        for w in await ctx.authority.store.list_workspaces()
        if w.workspace_id in roles
    ]
    return JSONResponse({"items": items})


@router.post(
    "/v1/workspaces",
    status_code=201,
    response_model=WorkspaceDoc,
    responses=errors_doc(*_WRITE_ERRORS),
    dependencies=_BODY,
)
async def create_workspace(ctx: Context, auth: Anyone, body: NameBody) -> JSONResponse:
    w = await ctx.authority.create_workspace(auth.caller, body.name)
    return JSONResponse(
        {"workspace_id": w.workspace_id, "name": w.name, "role": "owner"}, status_code=201
    )


@router.get(
    "/v1/workspaces/{workspace_id}/members",
    response_model=MemberList,
    responses=errors_doc(*_ERRORS),
)
async def list_members(ctx: Context, auth: Reader, workspace_id: str) -> JSONResponse:
    members = await ctx.authority.store.list_memberships(workspace_id=workspace_id)
    return JSONResponse({"items": [_member(m) for m in members]})


@router.put(
    "/v1/workspaces/{workspace_id}/members/{principal_id}",
    response_model=MemberDoc,
    responses=errors_doc(*_WRITE_ERRORS),
    dependencies=_BODY,
)
async def set_member(
    ctx: Context, auth: Manager, workspace_id: str, principal_id: str, body: RoleBody
) -> JSONResponse:
    m = await ctx.authority.set_member(auth.caller, workspace_id, principal_id, body.role)
    return JSONResponse(_member(m))


@router.delete(
    "/v1/workspaces/{workspace_id}/members/{principal_id}",
    status_code=204,
    response_class=Response,
    responses=errors_doc(*_ERRORS),
)
async def remove_member(
    ctx: Context, auth: Manager, workspace_id: str, principal_id: str
) -> Response:
    await ctx.authority.remove_member(auth.caller, workspace_id, principal_id)
    return Response(status_code=204)


@router.post(
    "/v1/workspaces/{workspace_id}/agent-principals",
    status_code=201,
    response_model=PrincipalDoc,
    responses=errors_doc(*_WRITE_ERRORS),
    dependencies=_BODY,
)
async def create_agent(
    ctx: Context, auth: Manager, workspace_id: str, body: AgentBody
) -> JSONResponse:
    agent = await ctx.authority.create_agent(auth.caller, workspace_id, body.name, body.role)
    return JSONResponse(_principal(agent), status_code=201)


@router.post(
    "/v1/agent-principals/{principal_id}/disable",
    response_model=PrincipalDoc,
    responses=errors_doc(*_ERRORS),
)
async def disable_agent(ctx: Context, auth: Anyone, principal_id: str) -> JSONResponse:
    agent = await ctx.authority.disable_agent(auth.caller, principal_id)
    return JSONResponse(_principal(agent))


@router.get("/v1/users", response_model=PrincipalList, responses=errors_doc(*_ERRORS))
async def list_users(ctx: Context, auth: Anyone) -> JSONResponse:
    """The users you may manage: every one for a server admin; for a workspace admin, the
    members of the workspaces they administer and the users they added."""
    users = await ctx.authority.list_users(auth.caller)
    return JSONResponse({"items": [_principal(u) for u in users]})


@router.get(
    "/v1/principals",
    response_model=PrincipalList,
    responses=errors_doc(*_ERRORS, "validation_error"),
)
async def list_principals(
    ctx: Context, auth: ServerAdmin, kind: Literal["user", "agent"] | None = None
) -> JSONResponse:
    """Every principal of the server, users and agent principals (server admins)."""
    found = await ctx.authority.list_principals(auth.caller, kind)
    return JSONResponse({"items": [_principal(p) for p in found]})


@router.put(
    "/v1/admins/{principal_id}", response_model=PrincipalDoc, responses=errors_doc(*_ERRORS)
)
async def grant_admin(ctx: Context, auth: ServerAdmin, principal_id: str) -> JSONResponse:
    """Make a user a server admin (server admins)."""
    user = await ctx.authority.set_server_admin(auth.caller, principal_id, True)
    return JSONResponse(_principal(user))


@router.delete(
    "/v1/admins/{principal_id}",
    response_model=PrincipalDoc,
    responses=errors_doc(*_ERRORS, "last_server_admin"),
)
async def revoke_admin(ctx: Context, auth: ServerAdmin, principal_id: str) -> JSONResponse:
    """A server admin no longer (never the last one)."""
    user = await ctx.authority.set_server_admin(auth.caller, principal_id, False)
    return JSONResponse(_principal(user))


@router.post(
    "/v1/users/{principal_id}/disable",
    response_model=PrincipalDoc,
    responses=errors_doc(*_ERRORS, "last_server_admin"),
)
async def disable_user(ctx: Context, auth: ServerAdmin, principal_id: str) -> JSONResponse:
    """Cut a person off everywhere (server admins): all their tokens are refused, their
    open streams close and the executions on their rights end `revoked`, within a second."""
    user = await ctx.authority.disable_user(auth.caller, principal_id)
    return JSONResponse(_principal(user))


class UserCreated(PrincipalDoc):
    #: The user's first token, to hand to them: shown in this response only.
    token: str


@router.post(
    "/v1/users",
    status_code=201,
    response_model=UserCreated,
    responses=errors_doc(*_WRITE_ERRORS),
    dependencies=_BODY,
)
async def create_user(ctx: Context, auth: ServerAdmin, body: NameBody) -> JSONResponse:
    user, token = await ctx.authority.create_user(auth.caller, body.name)
    response = JSONResponse({**_principal(user), "token": token}, status_code=201)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post(
    "/v1/tokens",
    status_code=201,
    response_model=TokenCreated,
    responses=errors_doc(*_WRITE_ERRORS),
    dependencies=_BODY,
)
async def create_token(ctx: Context, auth: Anyone, body: TokenBody) -> JSONResponse:
    record, token = await ctx.authority.create_token(
        auth.caller,
        principal_id=body.principal_id,
        name=body.name,
        expires_in=None if body.expires_in is None else float(body.expires_in),
    )
    response = JSONResponse({**_token(record), "token": token}, status_code=201)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get(
    "/v1/tokens", response_model=TokenList, responses=errors_doc(*_ERRORS, "validation_error")
)
async def list_tokens(
    ctx: Context,
    auth: Anyone,
    principal_id: Annotated[str | None, Query(max_length=128)] = None,
) -> JSONResponse:
    tokens = await ctx.authority.list_tokens(auth.caller, principal_id)
    return JSONResponse({"items": [_token(t) for t in tokens]})


@router.delete("/v1/tokens/{token_id}", response_model=TokenDoc, responses=errors_doc(*_ERRORS))
async def revoke_token(ctx: Context, auth: Anyone, token_id: str) -> JSONResponse:
    record = await ctx.authority.revoke_token(auth.caller, token_id)
    return JSONResponse(_token(record))


def _member_token(workspace_id: str, t: TokenRecord, revoked_here: float | None) -> dict[str, Any]:
    return {**_token(t), "workspace_id": workspace_id, "revoked_here_at": ts(revoked_here)}


@router.get(
    "/v1/workspaces/{workspace_id}/tokens",
    response_model=MemberTokenList,
    responses=errors_doc(*_ERRORS),
)
async def list_member_tokens(ctx: Context, auth: Manager, workspace_id: str) -> JSONResponse:
    """The tokens of this workspace's members (ids, never secrets), for its admins."""
    found = await ctx.authority.workspace_tokens(auth.caller, workspace_id)
    return JSONResponse({"items": [_member_token(workspace_id, t, at) for t, at in found]})


@router.delete(
    "/v1/workspaces/{workspace_id}/tokens/{token_id}",
    response_model=MemberTokenDoc,
    responses=errors_doc(*_ERRORS),
)
async def revoke_member_token(
    ctx: Context, auth: Manager, workspace_id: str, token_id: str
) -> JSONResponse:
    """Revoke a member's token for this workspace's work: it opens nothing here any more,
    and what it started here ends `revoked`; their other workspaces are untouched."""
    record, at = await ctx.authority.revoke_token_in(auth.caller, workspace_id, token_id)
    return JSONResponse(_member_token(workspace_id, record, at))
