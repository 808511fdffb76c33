"""A workspace's secrets over HTTP (docs/secrets.md): set, list, delete.

No route ever answers with a value: `PUT` takes one and answers with what `GET` shows
(name, creation, last change, last use). Admins manage secrets; a viewer may list the
names (a deployment refers to them by name). Key rotation is not an HTTP route: it is an
operator's action on the server's key (`nua secret rotate-key`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from opennua.protocol import timestamp
from opennua.secrets import MAX_VALUE_BYTES, NAME_PATTERN, SecretError, SecretInfo, SecretStore

from ._authz import Authorized, Manager, Reader
from ._edge import BODY_ERRORS, Context, errors_doc, guard_json_body
from ._problems import Problem

router = APIRouter()
SecretName = Annotated[str, Path(pattern=NAME_PATTERN)]


class SecretBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Characters, not bytes: the store checks the UTF-8 length (MAX_VALUE_BYTES) again.
    value: Annotated[str, Field(min_length=1, max_length=MAX_VALUE_BYTES)]


class SecretDoc(BaseModel):
    name: str
    created_at: str
    updated_at: str
    last_used_at: str | None


class SecretList(BaseModel):
    items: list[SecretDoc]


def secret_doc(s: SecretInfo) -> dict[str, Any]:
    return {
        "name": s.name,
        "created_at": timestamp(s.created_at),
        "updated_at": timestamp(s.updated_at),
        "last_used_at": None if s.last_used_at is None else timestamp(s.last_used_at),
    }


def _secrets(ctx: Context) -> SecretStore:
    if ctx.secrets is None:
        raise Problem("unavailable", "this server has no secret store")
    return ctx.secrets


def _workspace(auth: Authorized) -> str:
    assert auth.workspace_id is not None  # `read`/`manage` always resolve one
    return auth.workspace_id


@router.get(
    "/v1/secrets",
    response_model=SecretList,
    responses=errors_doc("not_found", "validation_error", "unavailable"),
)
async def list_secrets(ctx: Context, auth: Reader) -> JSONResponse:
    items = await _secrets(ctx).list(_workspace(auth))
    return JSONResponse({"items": [secret_doc(s) for s in items]})


@router.put(
    "/v1/secrets/{name}",
    response_model=SecretDoc,
    responses=errors_doc(*BODY_ERRORS, "not_found", "invalid_secret", "unavailable"),
    dependencies=[Depends(guard_json_body)],
)
async def put_secret(
    ctx: Context, auth: Manager, name: SecretName, body: SecretBody
) -> JSONResponse:
    try:
        info = await _secrets(ctx).put(_workspace(auth), name, body.value)
    except SecretError as exc:
        raise Problem(exc.code, exc.detail) from exc
    return JSONResponse(secret_doc(info))


@router.delete(
    "/v1/secrets/{name}",
    status_code=204,
    responses=errors_doc("not_found", "validation_error", "unavailable"),
)
async def delete_secret(ctx: Context, auth: Manager, name: SecretName) -> Response:
    if not await _secrets(ctx).delete(_workspace(auth), name):
        raise Problem("not_found", f"no secret named {name!r}")
    return Response(status_code=204)
