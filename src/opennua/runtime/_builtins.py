"""Built-in tools: plan, task, ask_user, publish_artifact, workspace-confined files, shell."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

from pydantic import BaseModel, Field, JsonValue

from opennua.protocol.actions import ArtifactPublished, FileChanged, PlanEntry, PlanUpdated
from opennua.runtime._tools import InputRequired, Tool, ToolContext, tool
from opennua.runtime.errors import ToolError

#: Variables a shell command inherits; everything else (API keys, tokens) is dropped.
SHELL_ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
SHELL_OUTPUT_CAP = 64 * 1024
SHELL_TIMEOUT = 120.0


def confine(workspace: Path, relative: str) -> Path:
    """`relative` inside `workspace`, or a `ToolError` that says why not.

    Refused: absolute paths, any `..` component, and paths whose resolution (symlinks
    followed) leaves the workspace.
    """
    if not relative or relative.strip() == "":
        raise ToolError("path must not be empty")
    pure = PurePosixPath(relative)
    if pure.is_absolute() or Path(relative).is_absolute():
        raise ToolError(f"path {relative!r} is absolute; use a path relative to the workspace")
    if ".." in pure.parts:
        raise ToolError(f"path {relative!r} contains '..'; paths must stay inside the workspace")
    root = workspace.resolve()
    target = (root / pure).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"path {relative!r} leads outside the workspace (symlink)")
    return target


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
    data = content.encode()
    sha = await ctx.artifacts.put(data, name=name, media_type=media_type)
    ctx.report(
        ArtifactPublished(
            artifact_id=ctx.idempotency_key.replace("call_", "art_", 1),
            name=name,
            media_type=media_type,
            size=len(data),
            sha256=sha,
            tool_call_id=ctx.tool_call_id,
        )
    )
    return f"Published {name} ({len(data)} bytes, sha256 {sha[:12]})."


@tool("read_file", kind="read", title="Read file", idempotent=True)
def read_file(ctx: ToolContext, path: str) -> str:
    """Read a text file in the workspace."""
    target = confine(ctx.workspace, path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}")
    return target.read_text(errors="replace")


@tool("write_file", kind="edit", title="Write file", idempotent=True)
def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite a text file in the workspace."""
    target = confine(ctx.workspace, path)
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    ctx.report(
        FileChanged(
            path=path, change="modified" if existed else "created", tool_call_id=ctx.tool_call_id
        )
    )
    return f"Wrote {len(content.encode())} bytes to {path}."


@tool("edit_file", kind="edit", title="Edit file")
def edit_file(ctx: ToolContext, path: str, old: str, new: str) -> str:
    """Replace the one occurrence of `old` with `new` in a workspace file."""
    target = confine(ctx.workspace, path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}")
    text = target.read_text()
    count = text.count(old)
    if count != 1:
        raise ToolError(f"`old` occurs {count} times in {path}; it must occur exactly once")
    target.write_text(text.replace(old, new, 1))
    ctx.report(FileChanged(path=path, change="modified", tool_call_id=ctx.tool_call_id))
    return f"Edited {path}."


@tool("list_files", kind="search", title="List files", idempotent=True)
def list_files(ctx: ToolContext, path: str = ".") -> str:
    """List the files under a workspace directory."""
    root = ctx.workspace.resolve()
    base = root if path in (".", "") else confine(ctx.workspace, path)
    if not base.is_dir():
        raise ToolError(f"no such directory: {path}")
    names = sorted(
        str(p.relative_to(root)) + ("/" if p.is_dir() else "")
        for p in base.rglob("*")
        if ".." not in p.relative_to(root).parts
    )
    return "\n".join(names) if names else "(empty)"


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
    env["HOME"] = str(ctx.workspace)
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        command,
        cwd=ctx.workspace,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        # Its own process group, so cancel and timeout kill the children it spawned too.
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        out = await asyncio.wait_for(_read_capped(proc.stdout), timeout_seconds)
        code = await asyncio.wait_for(proc.wait(), timeout_seconds)
    except TimeoutError:
        _kill_group(proc)
        await proc.wait()
        raise ToolError(f"command timed out after {timeout_seconds:g}s") from None
    except BaseException:
        _kill_group(proc)
        with contextlib.suppress(Exception):
            await asyncio.shield(proc.wait())
        raise
    text = out.decode(errors="replace")
    if code != 0:
        raise ToolError(f"exit status {code}\n{text}")
    return text


async def _read_capped(stream: asyncio.StreamReader) -> bytes:
    buf = bytearray()
    while chunk := await stream.read(65536):
        if len(buf) < SHELL_OUTPUT_CAP:
            buf += chunk[: SHELL_OUTPUT_CAP - len(buf)]
    if len(buf) >= SHELL_OUTPUT_CAP:
        buf += b"\n[output truncated]"
    return bytes(buf)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


BUILTIN_TOOLS: tuple[Tool, ...] = (
    plan,
    task,
    ask_user,
    publish_artifact,
    read_file,
    write_file,
    edit_file,
    list_files,
    shell,
)


def builtin(name: str) -> Tool:
    for t in BUILTIN_TOOLS:
        if t.name == name:
            return t
    raise KeyError(name)
