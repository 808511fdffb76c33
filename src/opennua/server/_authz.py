"""Authorization on every route, in one place: a FastAPI dependency per permission.

`Allow("read")` (and "act", "manage") finds the object a route's path names (a session,
an execution, an artifact, a workspace, a plugin or deployment name that a workspace
took), loads the workspace it belongs to and asks
`opennua.auth.Authority.check` whether the caller the Guard authenticated may do that
there: another workspace's object is 404 (its existence does not leak), a role too low
is 403 `insufficient_role`. A route with no object in its path acts in the workspace its
query or body names, else the caller's default one. `Allow("caller")` only needs an
authenticated caller: routes whose objects are the caller's own (whoami, tokens) or whose
Authority method checks itself (users, agent principals). `Allow("admin")`: a server
admin's route (server-level people management), in no workspace. `Allow("link")`: the
path's single-use download link is the credential (the Guard lets it through
unauthenticated).

`create_app` refuses a route that declares none of these, so a new route cannot skip it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends
from fastapi.routing import APIRoute, APIWebSocketRoute
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute

from opennua.auth import Authority, Caller, Denied, Permission
from opennua.host import Actor
from opennua.store import NotFound

from ._guard import CALLER_KEY, OPEN_PATHS
from ._problems import Problem

Need = Permission | Literal["caller", "admin", "link"]


@dataclass(frozen=True, slots=True)
class Authorized:
    """The caller, and the workspace the route acts in (None for caller-only routes)."""

    caller: Caller
    workspace_id: str | None

    def actor(self, authority: Authority) -> Actor:
        """Who the Host records as acting, with the grant a turn they start runs under."""
        grant = None
        if self.workspace_id is not None:
            grant = authority.grant_for(self.caller, self.workspace_id, model=None)
        return Actor(self.caller.principal_id, self.workspace_id, grant)


def caller_of(connection: HTTPConnection) -> Caller:
    caller: Caller | None = connection.scope.get(CALLER_KEY)
    if caller is None:  # pragma: no cover - the Guard runs before every route
        raise Problem("unauthorized", "not authenticated")
    return caller


def denied(exc: Denied) -> Problem:
    return Problem(exc.code, exc.detail)


async def _workspace(
    connection: HTTPConnection, authority: Authority, caller: Caller
) -> str | None:
    params = connection.path_params
    try:
        if "session_id" in params:
            return await authority.session_workspace(params["session_id"])
        if "execution_id" in params:
            return await authority.execution_workspace(params["execution_id"])
        if "artifact_id" in params:
            return await authority.artifact_workspace(params["artifact_id"])
        if "schedule_id" in params:
            return await authority.schedule_workspace(params["schedule_id"])
        if "hook_id" in params:
            return await authority.hook_workspace(params["hook_id"])
        if "subscription_id" in params:
            return await authority.subscription_workspace(params["subscription_id"])
    except NotFound as exc:
        raise Problem("not_found", str(exc)) from exc
    if "workspace_id" in params:
        workspace_id: str = params["workspace_id"]
        return workspace_id
    path = connection.url.path
    # `/v1/a2a/{name}`: a deployment's A2A endpoint acts where the deployment is.
    registry = path.startswith(("/v1/plugins/", "/v1/deployments/", "/v1/a2a/"))
    if "name" in params and registry:  # a `{name}` elsewhere (a secret's) is no registry's
        kind = "plugin" if path.startswith("/v1/plugins/") else "deployment"
        owner = await authority.registry_workspace(kind, params["name"])
        if owner is not None:
            return owner
    named = connection.query_params.get("workspace_id")
    return named or caller.default_workspace


class Allow:
    """The dependency: `Depends(Allow("read"))`; see the module docstring."""

    def __init__(self, need: Need) -> None:
        self.need = need

    async def __call__(self, connection: HTTPConnection) -> Authorized:
        return await authorize(connection, self.need)


async def authorize(connection: HTTPConnection, need: Need) -> Authorized:
    """The check itself: `Problem` (404 or 403) unless the caller may `need` here."""
    authority: Authority = connection.app.state.context.authority
    if need == "link":
        # The link is the credential: checked, re-authorized for its principal now, spent.
        try:
            caller, artifact_id = await authority.redeem_download_link(
                connection.path_params["link"]
            )
        except Denied as exc:
            raise denied(exc) from exc
        connection.scope[LINK_ARTIFACT_KEY] = artifact_id
        return Authorized(caller, await authority.artifact_workspace(artifact_id))
    caller = caller_of(connection)
    if need == "caller":
        return Authorized(caller, None)
    if need == "admin":
        try:
            authority.require_server_admin(caller)
        except Denied as exc:
            raise denied(exc) from exc
        return Authorized(caller, None)
    workspace_id = await _workspace(connection, authority, caller)
    try:
        authority.check(caller, workspace_id, need)
    except Denied as exc:
        raise denied(exc) from exc
    return Authorized(caller, workspace_id)


class Signed:
    """The dependency of a route that takes no token but a signature it verifies itself
    (a webhook delivery, `POST /v1/hooks/{hook_id}`): the Guard lets only those through
    unauthenticated (`_guard.signed_delivery`)."""

    async def __call__(self) -> None:
        return None


#: Where `Allow("link")` leaves the artifact the link opened.
LINK_ARTIFACT_KEY = "opennua.link_artifact"

Reader = Annotated[Authorized, Depends(Allow("read"))]
Acting = Annotated[Authorized, Depends(Allow("act"))]
Manager = Annotated[Authorized, Depends(Allow("manage"))]
Anyone = Annotated[Authorized, Depends(Allow("caller"))]
ServerAdmin = Annotated[Authorized, Depends(Allow("admin"))]
LinkHolder = Annotated[Authorized, Depends(Allow("link"))]


def api_routes(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, also those of included routers: FastAPI keeps an included router as
    one entry of `app.router.routes`, its routes behind it (a check that looked only at
    the top level saw no API route at all)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from api_routes(inner.routes)
        else:
            yield route


def unguarded(routes: Iterable[BaseRoute]) -> list[str]:
    """The API routes that declare no `Allow` dependency (create_app refuses them)."""
    missing = []
    for route in api_routes(routes):
        if not isinstance(route, APIRoute | APIWebSocketRoute) or route.path in OPEN_PATHS:
            continue
        calls = [getattr(d, "call", None) for d in _walk(route.dependant)]
        if not any(isinstance(call, Allow | Signed) for call in calls):
            missing.append(getattr(route, "path", "?"))
    return missing


def _walk(dependant: object) -> list[object]:
    out: list[object] = []
    stack = list(getattr(dependant, "dependencies", []))
    while stack:
        d = stack.pop()
        out.append(d)
        stack.extend(getattr(d, "dependencies", []))
    return out
