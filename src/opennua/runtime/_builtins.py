"""Built-in tools: plan, task, ask_user, publish_artifact, workspace-confined files, shell."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import unicodedata
from typing import Annotated, Literal

from pydantic import BaseModel, Field, JsonValue

from opennua.protocol.actions import ArtifactPublished, ErrorInfo, PlanEntry, PlanUpdated
from opennua.runtime._commands import run_command
from opennua.runtime._diffs import file_change
from opennua.runtime._errors import BlobsUnavailable, ToolError
from opennua.runtime._files import edit_text, list_tree, read_text, write_text
from opennua.runtime._sandbox import SandboxUnavailable
from opennua.runtime._search import glob_files, grep_files
from opennua.runtime._tools import InputRequired, Tool, ToolContext, tool
from opennua.runtime._web import fetch

#: Variables a shell command inherits; everything else (API keys, tokens) is dropped.
SHELL_ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
SHELL_OUTPUT_CAP = 64 * 1024
SHELL_TIMEOUT = 120.0
#: An artifact's name is a file name (its download's); a media type is `type/subtype` with
#: optional `; name=value` parameters, all printable ASCII (RFC 6838, RFC 9110 §8.3.1).
_TOKEN = r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"
_MEDIA_TYPE = re.compile(
    rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|\"[\x20\x21\x23-\x5b\x5d-\x7e]*\"))*"
)


class PlanItem(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


@tool("plan", kind="think", title="Update plan", idempotent=True)
def plan(ctx: ToolContext, entries: list[PlanItem]) -> str:
    """Replace this run's TODO list. Send every entry each time, with its current status."""
    ctx.report(
        PlanUpdated(
            entries=[
                PlanEntry(id=str(i + 1), content=e.content, status=e.status, priority=e.priority)
                for i, e in enumerate(entries)
            ]
        )
    )
    done = sum(e.status == "completed" for e in entries)
    return f"Plan updated: {done}/{len(entries)} completed."


@tool("task", kind="other", title="Run sub-agent", idempotent=True)
def task(name: str, task: str) -> str:
    """Hand a self-contained task to a sub-agent and get its final answer back."""
    raise AssertionError("the loop runs `task` as a nested run; this body never runs")


@tool("ask_user", kind="other", title="Ask the user", idempotent=True)
def ask_user(
    ctx: ToolContext, question: str, response_schema: dict[str, JsonValue] | None = None
) -> JsonValue:
    """Ask the user a question and wait for the answer (free text, or matching a schema)."""
    if ctx.answer is None:
        raise InputRequired(question, response_schema)
    return ctx.answer


@tool("publish_artifact", kind="other", title="Publish artifact", idempotent=True)
async def publish_artifact(
    ctx: ToolContext, name: str, content: str, media_type: str = "text/markdown"
) -> str:
    """Publish a file as an artifact the user can download."""
    _check_artifact(name, media_type)
    data = content.encode()
    sha = hashlib.sha256(data).hexdigest()
    error = None
    try:
        await ctx.artifacts.put(data, name=name, media_type=media_type)
    except BlobsUnavailable as exc:
        # The artifact is registered all the same, `failed`: the turn goes on, every client
        # shows the failed upload, and a retry (POST …/artifacts/{aid}/retry) re-uploads the
        # content this call's input keeps in the session log.
        error = ErrorInfo(code=exc.code, message=exc.message[:2000])
    artifact_id = ctx.idempotency_key.replace("call_", "art_", 1)
    ctx.report(
        ArtifactPublished(
            artifact_id=artifact_id,
            name=name,
            media_type=media_type,
            size=len(data),
            sha256=sha,
            tool_call_id=ctx.tool_call_id,
            state="published" if error is None else "failed",
            error=error,
        )
    )
    if error is not None:
        return (
            f"Registered {name} as {artifact_id}, but its upload failed ({error.message}); "
            "the user can retry the upload. Do not publish it again."
        )
    return f"Published {name} ({len(data)} bytes, sha256 {sha[:12]})."


def _check_artifact(name: str, media_type: str) -> None:
    if not name.strip():
        raise ToolError("the artifact name must not be empty")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs") for ch in name):
        raise ToolError("the artifact name must not contain control characters")
    if "/" in name or "\\" in name or name in (".", ".."):
        raise ToolError("the artifact name is a file name: no '/' or '\\', not '.' or '..'")
    if len(name.encode()) > 255:
        raise ToolError("the artifact name is longer than 255 bytes")
    if _MEDIA_TYPE.fullmatch(media_type) is None:
        raise ToolError(
            f"media_type {media_type[:100]!r} is not a media type such as text/markdown"
        )


@tool("read_file", kind="read", title="Read file", idempotent=True)
async def read_file(ctx: ToolContext, path: str) -> str:
    """Read a text file in the workspace."""
    return await asyncio.to_thread(read_text, ctx.workdir, path)


@tool("write_file", kind="edit", title="Write file", idempotent=True)
async def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite a text file in the workspace."""
    before = await asyncio.to_thread(write_text, ctx.workdir, path, content)
    await _report_change(ctx, path, before, content.encode())
    return f"Wrote {len(content.encode())} bytes to {path}."


@tool("edit_file", kind="edit", title="Edit file")
async def edit_file(ctx: ToolContext, path: str, old: str, new: str) -> str:
    """Replace the one occurrence of `old` with `new` in a workspace file."""
    before, after = await asyncio.to_thread(edit_text, ctx.workdir, path, old, new)
    await _report_change(ctx, path, before, after)
    return f"Edited {path}."


async def _report_change(ctx: ToolContext, path: str, before: bytes | None, after: bytes) -> None:
    change, big = await asyncio.to_thread(
        file_change, path, before, after, tool_call_id=ctx.tool_call_id
    )
    if big is not None:
        try:
            sha = await ctx.artifacts.put(big, name=f"{path}.diff", media_type="text/x-diff")
            change = change.model_copy(update={"diff_ref": f"sha256:{sha}"})
        except BlobsUnavailable:
            pass  # the change is still reported (size, sha256), without its diff
    ctx.report(change)


@tool("list_files", kind="search", title="List files", idempotent=True)
async def list_files(ctx: ToolContext, path: str = ".") -> str:
    """List the files under a workspace directory."""
    names = await asyncio.to_thread(list_tree, ctx.workdir, path)
    return "\n".join(names) if names else "(empty)"


@tool("glob", kind="search", title="Find files", idempotent=True)
async def glob(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    """Find workspace files by name: a glob such as `**/*.py` or `src/*.{ts,tsx}`, under
    `path`. Lists at most 500 paths."""
    return await asyncio.to_thread(glob_files, ctx.workdir, pattern, path)


@tool("grep", kind="search", title="Search files", idempotent=True)
async def grep(
    ctx: ToolContext,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    output: Literal["files_with_matches", "content", "count"] = "files_with_matches",
) -> str:
    """Search workspace text files for a regular expression (Python syntax), under `path`,
    only files matching `glob` if given. `output`: the files that match, the matching
    lines (`file:line:text`), or a count per file. Bounded to 500 results."""
    return await asyncio.to_thread(
        grep_files, ctx.workdir, pattern, path, glob, ignore_case, output
    )


@tool("web_fetch", kind="fetch", title="Fetch URL", idempotent=True)
async def web_fetch(ctx: ToolContext, url: str) -> str:
    """Fetch an http(s) URL and return its body as text (at most 256 KB). Only hosts the
    deployment's egress list allows are reachable."""
    return await fetch(ctx.sandbox.egress, url)


def scrubbed_env(source: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if source is None else source
    return {k: env[k] for k in SHELL_ENV_ALLOWLIST if k in env}


@tool("shell", kind="execute", title="Run command", requires_approval=True)
async def shell(
    ctx: ToolContext,
    command: str,
    timeout_seconds: Annotated[float, Field(gt=0, le=SHELL_TIMEOUT)] = 60.0,
) -> str:
    """Run a shell command in the workspace directory."""
    env = dict(ctx.shell_env) or scrubbed_env()
    env["HOME"] = str(ctx.workdir)  # the sandbox's own view replaces it when confined
    if "\x00" in command:
        raise ToolError("the command contains a NUL byte")
    try:
        async with asyncio.timeout(timeout_seconds):
            result = await run_command(
                ctx.sandbox,
                ["/bin/sh", "-c", command],
                workdir=ctx.workdir,
                env=env,
                output_cap=SHELL_OUTPUT_CAP,
            )
    except TimeoutError:
        raise ToolError(f"command timed out after {timeout_seconds:g}s") from None
    except SandboxUnavailable as exc:
        raise ToolError(
            f"shell is disabled: {exc.reason}. The operator can install bubblewrap, or run "
            "`nua serve --sandbox none` to allow unconfined commands.",
            code="sandbox_unavailable",
        ) from None
    text = result.output.decode(errors="replace")
    if result.exit_status != 0:
        raise ToolError(f"exit status {result.exit_status}\n{text}")
    return text


BUILTIN_TOOLS: tuple[Tool, ...] = (
    plan,
    task,
    ask_user,
    publish_artifact,
    read_file,
    write_file,
    edit_file,
    list_files,
    glob,
    grep,
    web_fetch,
    shell,
)


def builtin(name: str) -> Tool:
    for t in BUILTIN_TOOLS:
        if t.name == name:
            return t
    raise KeyError(name)
