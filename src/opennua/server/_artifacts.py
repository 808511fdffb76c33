"""Artifacts and stored tool outputs: metadata and bytes, read through the Host.

Names and media types were chosen by a model or a tool, so nothing of them reaches a
header unchecked: a header with CR/LF in it would split the response (h11 refuses and
drops the connection), and a non-ASCII name needs RFC 6266's `filename*`.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from opennua.protocol import timestamp

from ._authz import LINK_ARTIFACT_KEY, Acting, LinkHolder, Reader
from ._edge import Context, errors_doc
from ._guard import LINK_PREFIX

router = APIRouter()

_TOKEN = r"[A-Za-z0-9!#$&^_.+-]+"
_MEDIA_TYPE = re.compile(
    rf"{_TOKEN}/{_TOKEN}(\s*;\s*{_TOKEN}=({_TOKEN}|\"[^\"\\\x00-\x1f\x7f]*\"))*", re.ASCII
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_UNSAFE_FALLBACK = re.compile(r"[^\x20-\x7e]|[\"\\%]")


class ArtifactDoc(BaseModel):
    artifact_id: str
    session_id: str
    name: str
    media_type: str
    size: int
    sha256: str
    created_at: str
    turn_id: str | None
    tool_call_id: str | None


def safe_media_type(media_type: str) -> str:
    """The stored media type when it is a well-formed one, else `application/octet-stream`."""
    if _MEDIA_TYPE.fullmatch(media_type.strip()):
        return media_type.strip()
    return "application/octet-stream"


def content_disposition(kind: str, name: str) -> str:
    """`kind; filename="ascii"; filename*=UTF-8''…` (RFC 6266): never a control character."""
    name = _CONTROL.sub("", name) or "download"
    fallback = _UNSAFE_FALLBACK.sub("_", name)
    encoded = quote(name.encode("utf-8", "replace"), safe="")
    if encoded == fallback:
        return f'{kind}; filename="{fallback}"'
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"


@router.get(
    "/v1/artifacts/{artifact_id}",
    response_model=ArtifactDoc,
    responses=errors_doc("not_found", "unavailable"),
)
async def artifact(ctx: Context, auth: Reader, artifact_id: str) -> JSONResponse:
    a = await ctx.host.artifact(artifact_id)
    return JSONResponse(
        {
            "artifact_id": a.artifact_id,
            "session_id": a.session_id,
            "name": a.name,
            "media_type": a.media_type,
            "size": a.size,
            "sha256": a.sha256,
            "created_at": timestamp(a.created_at),
            "turn_id": a.turn_id,
            "tool_call_id": a.tool_call_id,
        }
    )


@router.get(
    "/v1/artifacts/{artifact_id}/content",
    response_class=Response,
    responses={
        200: {"description": "the artifact's bytes", "content": {"*/*": {}}},
        **errors_doc("not_found", "blob_corrupted", "unavailable"),
    },
)
async def artifact_content(ctx: Context, auth: Reader, artifact_id: str) -> Response:
    return await _download(ctx, artifact_id)


class DownloadLinkDoc(BaseModel):
    url: str
    expires_at: str


@router.post(
    "/v1/artifacts/{artifact_id}/links",
    status_code=201,
    response_model=DownloadLinkDoc,
    responses=errors_doc("not_found", "unavailable"),
)
async def artifact_link(ctx: Context, auth: Reader, artifact_id: str) -> JSONResponse:
    """A single-use download link for the caller, valid for a few minutes (browsers, chat)."""
    link, expires = await ctx.authority.mint_download_link(auth.caller, artifact_id)
    return JSONResponse(
        {"url": f"{LINK_PREFIX}{link}", "expires_at": timestamp(expires)}, status_code=201
    )


@router.get(
    "/v1/downloads/{link}",
    response_class=Response,
    responses={
        200: {"description": "the artifact's bytes", "content": {"*/*": {}}},
        **errors_doc("not_found", "link_expired", "link_used", "blob_corrupted", "unavailable"),
    },
)
async def download(ctx: Context, auth: LinkHolder, link: str, request: Request) -> Response:
    """Open a download link once; expired or used: 410 (see docs/server.md "Downloads")."""
    return await _download(ctx, request.scope[LINK_ARTIFACT_KEY])


async def _download(ctx: Context, artifact_id: str) -> Response:
    a, data = await ctx.host.artifact_content(artifact_id)
    return Response(
        data,
        media_type=safe_media_type(a.media_type),
        headers={
            "Content-Disposition": content_disposition("attachment", a.name),
            "ETag": f'"{a.sha256}"',
            "X-Content-Type-Options": "nosniff",
        },
    )


class ArtifactStateDoc(BaseModel):
    artifact_id: str
    state: str
    error: dict[str, str] | None


@router.post(
    "/v1/sessions/{session_id}/artifacts/{artifact_id}/retry",
    response_model=ArtifactStateDoc,
    responses=errors_doc("not_found", "unavailable"),
)
async def retry_artifact(
    ctx: Context, auth: Acting, session_id: str, artifact_id: str
) -> JSONResponse:
    """Upload again an artifact of this session whose upload failed; its state after."""
    a = await ctx.host.retry_artifact(session_id, artifact_id)
    return JSONResponse({"artifact_id": a["artifact_id"], "state": a["state"], "error": a["error"]})


@router.get(
    "/v1/sessions/{session_id}/file-changes/{change_id}/diff",
    response_class=Response,
    responses={
        200: {"description": "the unified diff", "content": {"text/x-diff": {}}},
        **errors_doc("not_found", "blob_corrupted", "unavailable"),
    },
)
async def file_diff(ctx: Context, auth: Reader, session_id: str, change_id: str) -> Response:
    """A file change's whole diff (also one too big to travel in the action: `diff_ref`)."""
    text = await ctx.host.file_diff(session_id, change_id)
    return _inline_text(text.encode(), f"{change_id}.diff")


@router.get(
    "/v1/sessions/{session_id}/tool-calls/{tool_call_id}/output",
    response_class=Response,
    responses={
        200: {"description": "the full output", "content": {"text/plain": {}}},
        **errors_doc("not_found", "blob_corrupted", "unavailable"),
    },
)
async def tool_output(ctx: Context, auth: Reader, session_id: str, tool_call_id: str) -> Response:
    data = await ctx.host.tool_output(session_id, tool_call_id)
    return _inline_text(data, f"{tool_call_id}.txt")


def _inline_text(data: bytes, filename: str) -> Response:
    """Text a model or a tool wrote, shown inline as text only: never sniffed into
    something else, and sandboxed should a browser render it."""
    return Response(
        data,
        media_type="text/plain; charset=utf-8",
        headers={
            "Content-Disposition": content_disposition("inline", filename),
            "Content-Security-Policy": "sandbox",
            "X-Content-Type-Options": "nosniff",
        },
    )
