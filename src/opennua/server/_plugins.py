"""The plugin registry and deployments over HTTP (docs/plugins.md, docs/server.md).

A publish is three steps so that a re-publish sends only what changed: ask which file
contents the workspace cannot name yet (`POST /v1/plugin-files/missing`), upload each
(`POST /v1/plugin-files`, named by the sha256 the server computes), then publish the
listing (`POST /v1/plugins`). Contents are scoped to the workspace (`host/_plugin_files`).
The rules live in the Host's `Registry`; every refusal is problem JSON with its `code`.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints

from opennua.host import DeploymentSpec, Refused, Registry, Scope, problem_doc
from opennua.plugins import MAX_FILE_BYTES, MAX_FILES
from opennua.protocol import timestamp
from opennua.protocol.intents import NAME_PATTERN
from opennua.store import ChannelMove, DeploymentRecord, PluginFile, PluginVersion

from ._authz import Authorized, Manager, Reader
from ._edge import BODY_ERRORS, Context, errors_doc, guard_json_body
from ._problems import Problem

router = APIRouter()

_SHA256 = r"^[0-9a-f]{64}$"
Sha256 = Annotated[str, Field(pattern=_SHA256)]
PluginName = Annotated[str, Path(pattern=NAME_PATTERN)]
_READ_ERRORS = ("not_found", "validation_error", "unavailable")
_WRITE_ERRORS = (*BODY_ERRORS, "unavailable")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MissingBody(_Body):
    sha256: Annotated[list[Sha256], Field(max_length=MAX_FILES)]


class MissingDoc(BaseModel):
    missing: list[str]


class UploadedDoc(BaseModel):
    sha256: str
    size: int


#: A relative POSIX path inside the plugin: no empty, `.` or `..` segment, no leading `/`,
#: no backslash or control character (written without look-arounds: pydantic's engine).
_C = r"[^/\\\x00-\x1f\x7f]"
_D = r"[^./\\\x00-\x1f\x7f]"
_SEGMENT = rf"(?:{_D}{_C}*|\.{_D}{_C}*|\.\.{_C}+)"
PLUGIN_PATH = rf"^{_SEGMENT}(?:/{_SEGMENT})*$"
PluginPath = Annotated[str, StringConstraints(pattern=PLUGIN_PATH, max_length=512)]


class ListedFile(_Body):
    sha256: Sha256
    size: Annotated[int, Field(ge=0, le=MAX_FILE_BYTES)]
    executable: bool = False


class FileDoc(_Body):
    path: Annotated[str, Field(min_length=1, max_length=512)]
    sha256: Sha256
    size: Annotated[int, Field(ge=0)]
    executable: bool = False


class PublishBody(_Body):
    """The version's files by path (a path can only be listed once), and who sees it: the
    workspace (default) or only its publisher."""

    visibility: Literal["workspace", "private"] = "workspace"
    #: For a plugin whose manifest does not say them: its name (required without a
    #: manifest) and version (default: `0.0.0+` and the digest's first 12 hex digits).
    name: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    version: Annotated[str, Field(min_length=1, max_length=128)] | None = None

    files: Annotated[
        dict[PluginPath, ListedFile],
        Field(
            min_length=1,
            max_length=MAX_FILES,
            # Pydantic states the key rule as patternProperties only; say that it is the
            # only rule, so a key that does not match is invalid in the document too.
            json_schema_extra={
                "additionalProperties": False,
                "propertyNames": {"pattern": PLUGIN_PATH, "maxLength": 512},
            },
        ),
    ]


class PluginProblemDoc(BaseModel):
    """One finding of the plugin format (docs/plugins.md, "Problems")."""

    severity: Literal["error", "warning", "ignored"]
    message: str
    file: str | None
    line: int | None


class ServerDoc(BaseModel):
    """One MCP server (or, transport `a2a`, one A2A agent: the tool
    `<prefix>__send_message`) of the plugin: its tools are named `<prefix>__<tool>`; one
    not `configured` (a placeholder URL) runs only once a deployment supplies its URL."""

    name: str
    prefix: str
    transport: Literal["stdio", "http", "sse", "a2a"]
    configured: bool


class VersionDoc(BaseModel):
    name: str
    version: str
    digest: str
    description: str
    published_at: str
    #: None: server-wide (the built-in plugin).
    workspace_id: str | None
    #: Who published it (None: the built-in plugin).
    publisher_id: str | None = None
    visibility: Literal["workspace", "private"]
    size: int
    files: list[FileDoc]
    #: Only from a publish or a single version's read: the plugin's warnings and the
    #: features opennua does not run (`ignored`), and its MCP servers.
    problems: list[PluginProblemDoc] = []
    servers: list[ServerDoc] = []
    #: Only from a publish or a single version's read: the plugin's `egress` setting, a
    #: request (a deployment's `egress` decides what sandboxed code may reach).
    egress_requested: list[str] | None = None
    #: Only from a publish or a single version's read: its slash commands ({name,
    #: description, argument_hint}) and command hooks ({event, matcher}).
    commands: list[dict[str, str]] | None = None
    hooks: list[dict[str, str | None]] | None = None


class MoveDoc(BaseModel):
    channel: str
    seq: int
    kind: str
    version: str
    moved_at: str


class PluginDoc(BaseModel):
    name: str
    channels: dict[str, str]
    versions: list[VersionDoc]
    history: list[MoveDoc]


class PluginList(BaseModel):
    items: list[dict[str, JsonValue]]


class ReleaseBody(_Body):
    version: Annotated[str, Field(min_length=1, max_length=128)]


class ProblemDoc(BaseModel):
    severity: Literal["error", "warning", "ignored"]
    message: str
    file: str | None = None
    line: int | None = None


class DeploymentDoc(BaseModel):
    name: str
    digest: str
    created_at: str
    workspace_id: str | None
    spec: dict[str, JsonValue]
    #: Only from a save or a single deployment's read: what its plugin version asks for
    #: (`egress` in opennua.toml), shown beside the `egress` the deployment allows.
    egress_requested: list[str] | None = None
    #: Only from a save or a single deployment's read: what it leaves its plugin without,
    #: as warnings (servers that need configuring, model aliases nothing maps).
    problems: list[ProblemDoc] | None = None


class DeploymentList(BaseModel):
    items: list[DeploymentDoc]


def _registry(ctx: Context) -> Registry:
    return ctx.host.registry


def _scope(auth: Authorized) -> Scope:
    assert auth.workspace_id is not None  # every registry route is in a workspace
    return Scope(auth.workspace_id, auth.caller.principal_id)


def version_doc(v: PluginVersion, *, files: bool = True) -> dict[str, Any]:
    return {
        "name": v.name,
        "version": v.version,
        "digest": v.digest,
        "description": v.description,
        "published_at": timestamp(v.published_at),
        "workspace_id": v.workspace_id,
        "publisher_id": v.publisher_id,
        "visibility": v.visibility,
        "size": sum(f.size for f in v.files),
        "files": [
            {"path": f.path, "sha256": f.sha256, "size": f.size, "executable": f.executable}
            for f in v.files
        ]
        if files
        else [],
    }


def move_doc(m: ChannelMove) -> dict[str, Any]:
    return {
        "channel": m.channel,
        "seq": m.seq,
        "kind": m.kind,
        "version": m.version,
        "moved_at": timestamp(m.moved_at),
    }


def deployment_doc(d: DeploymentRecord) -> dict[str, Any]:
    return {
        "name": d.name,
        "digest": d.digest,
        "created_at": timestamp(d.created_at),
        "workspace_id": d.workspace_id,
        "spec": d.spec,
    }


# -- files and versions ----------------------------------------------------------------------


@router.post(
    "/v1/plugin-files/missing",
    response_model=MissingDoc,
    responses=errors_doc(*_WRITE_ERRORS),
    dependencies=[Depends(guard_json_body)],
)
async def missing_files(ctx: Context, auth: Manager, body: MissingBody) -> JSONResponse:
    """Of these contents, those this workspace cannot name yet (it did not upload them and
    no version it sees lists them), whether or not another workspace has them."""
    missing = await _registry(ctx).files.missing(body.sha256, _scope(auth))
    return JSONResponse({"missing": missing})


@router.post(
    "/v1/plugin-files",
    status_code=201,
    response_model=UploadedDoc,
    responses=errors_doc(*_WRITE_ERRORS, "unsupported_media_type", "workspace_quota_exceeded"),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def upload_file(ctx: Context, auth: Manager, request: Request) -> JSONResponse:
    """Store one file's bytes under their sha256 (computed here: the name cannot lie), as
    they arrive; from then on this workspace may name them (within its quota)."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/octet-stream":
        raise Problem("unsupported_media_type", "send the file as application/octet-stream")
    ref = await _registry(ctx).files.upload(request.stream(), _scope(auth))
    return JSONResponse({"sha256": ref.sha256, "size": ref.size}, status_code=201)


@router.post(
    "/v1/plugins",
    status_code=201,
    response_model=VersionDoc,
    responses={
        200: {"description": "this exact version was already published (idempotent)"},
        **errors_doc(
            *_WRITE_ERRORS,
            "version_exists",
            "name_taken",
            "files_missing",
            "invalid_plugin",
            "plugin_too_large",
        ),
    },
    dependencies=[Depends(guard_json_body)],
)
async def publish(ctx: Context, auth: Manager, body: PublishBody) -> JSONResponse:
    files = [
        PluginFile(path=p, sha256=f.sha256, size=f.size, executable=f.executable)
        for p, f in body.files.items()
    ]
    registry = _registry(ctx)
    published = await registry.publish(
        files,
        scope=_scope(auth),
        visibility=body.visibility,
        name=body.name,
        version=body.version,
    )
    doc = {
        **version_doc(published.version),
        **await _contents(registry, published.version),
        "egress_requested": await registry.egress_request(published.version),
    }
    return JSONResponse(doc, status_code=201 if published.created else 200)


@router.get("/v1/plugins", response_model=PluginList, responses=errors_doc(*_READ_ERRORS))
async def list_plugins(ctx: Context, auth: Reader) -> JSONResponse:
    items = [
        {"name": p.name, "latest": p.versions[-1].version, "channels": p.channels}
        for p in await _registry(ctx).plugins(_scope(auth))
    ]
    return JSONResponse({"items": items})


@router.get("/v1/plugins/{name}", response_model=PluginDoc, responses=errors_doc(*_READ_ERRORS))
async def plugin(ctx: Context, auth: Reader, name: PluginName) -> JSONResponse:
    p = await _registry(ctx).plugin(name, _scope(auth))
    return JSONResponse(
        {
            "name": name,
            "channels": p.channels,
            "versions": [version_doc(v, files=False) for v in p.versions],
            "history": [move_doc(m) for m in p.history],
        }
    )


@router.get(
    "/v1/plugins/{name}/versions/{version}",
    response_model=VersionDoc,
    responses=errors_doc(*_READ_ERRORS),
)
async def plugin_version(
    ctx: Context, auth: Reader, name: PluginName, version: str
) -> JSONResponse:
    registry = _registry(ctx)
    found = await registry.version(name, version, _scope(auth))
    doc = version_doc(found) | await _contents(registry, found)
    return JSONResponse(doc | {"egress_requested": await registry.egress_request(found)})


async def _contents(registry: Registry, version: PluginVersion) -> dict[str, Any]:
    """What reading the version says: its problems, servers, commands and hooks."""
    try:
        plugin = await registry.plugin_of(version)
    except Refused:  # published by a newer, laxer opennua: its files are still listed
        return {}
    return {
        "problems": [problem_doc(p) for p in plugin.problems],
        "commands": [
            {"name": c.name, "description": c.description, "argument_hint": c.argument_hint}
            for c in plugin.commands
        ],
        "hooks": [{"event": h.event, "matcher": h.matcher} for h in plugin.hooks],
        "servers": plugin.connections(),
    }


# -- channels --------------------------------------------------------------------------------


@router.post(
    "/v1/plugins/{name}/channels/{channel}/release",
    response_model=MoveDoc,
    responses=errors_doc(*_WRITE_ERRORS, "not_found", "forbidden", "invalid_plugin"),
    dependencies=[Depends(guard_json_body)],
)
async def release(
    ctx: Context, auth: Manager, name: PluginName, channel: PluginName, body: ReleaseBody
) -> JSONResponse:
    moved = await _registry(ctx).release(name, channel, body.version, _scope(auth))
    return JSONResponse(move_doc(moved))


@router.post(
    "/v1/plugins/{name}/channels/{channel}/rollback",
    response_model=MoveDoc,
    responses=errors_doc(*_WRITE_ERRORS, "not_found", "forbidden", "no_earlier_release"),
)
async def rollback(
    ctx: Context, auth: Manager, name: PluginName, channel: PluginName
) -> JSONResponse:
    return JSONResponse(move_doc(await _registry(ctx).rollback(name, channel, _scope(auth))))


# -- deployments -----------------------------------------------------------------------------


@router.put(
    "/v1/deployments/{name}",
    response_model=DeploymentDoc,
    responses=errors_doc(
        *_WRITE_ERRORS,
        "invalid_deployment",
        "deployment_unresolvable",
        "name_taken",
        "egress_denied",
        "secret_missing",
        "invalid_plugin",
    ),
    dependencies=[Depends(guard_json_body)],
)
async def deploy(
    ctx: Context, auth: Manager, name: PluginName, body: DeploymentSpec
) -> JSONResponse:
    # Credential references name secrets of the workspace the deployment is saved in.
    registry = _registry(ctx)
    saved = await registry.deploy(name, body, _scope(auth))
    return JSONResponse(deployment_doc(saved) | await _beside(registry, body, auth))


@router.get("/v1/deployments", response_model=DeploymentList, responses=errors_doc(*_READ_ERRORS))
async def deployments(ctx: Context, auth: Reader) -> JSONResponse:
    found = await _registry(ctx).deployments(_scope(auth))
    return JSONResponse({"items": [deployment_doc(d) for d in found]})


@router.get(
    "/v1/deployments/{name}", response_model=DeploymentDoc, responses=errors_doc(*_READ_ERRORS)
)
async def deployment(ctx: Context, auth: Reader, name: PluginName) -> JSONResponse:
    registry = _registry(ctx)
    found = await registry.deployment(name, _scope(auth))
    spec = DeploymentSpec.model_validate(found.spec)
    return JSONResponse(deployment_doc(found) | await _beside(registry, spec, auth))


async def _beside(registry: Registry, spec: DeploymentSpec, auth: Authorized) -> dict[str, Any]:
    """What a single deployment's answer shows beside its spec, from its plugin version."""
    scope = _scope(auth)
    problems = await registry.problems(spec, scope)
    return {
        "egress_requested": await registry.egress_request(spec, scope),
        "problems": [dataclasses.asdict(p) for p in problems],
    }
