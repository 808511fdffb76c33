"""`nua schedule create|list|pause|resume|delete|runs` and `nua hook create|list|delete`
(docs/automation.md). Each is one API call; errors map to the documented exit codes.

`nua hook create` prints the hook's URL and its signing secret once: the server keeps the
secret sealed and never shows it again.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

import typer

from opennua.client import Client
from opennua.client.responses import HookDoc, RunDoc, ScheduleDoc

from ._context import Settings, emit, emit_items, execute, write_line
from ._safe import SafeText

schedule_app = typer.Typer(no_args_is_help=True, help="Cron schedules that start turns.")
hook_app = typer.Typer(no_args_is_help=True, help="Signed webhooks that start turns.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Workspace = Annotated[
    str | None, typer.Option("--workspace", "-w", help="Default: your first workspace.")
]
Deployment = Annotated[str, typer.Option("--deployment", "-d", help="What the turns run.")]
Prompt = Annotated[str, typer.Option("--prompt", "-p", help="The prompt template.")]


def _line(s: ScheduleDoc) -> str:
    state = "paused" if s["paused"] else f"next {s['next_fire_time'] or '—'}"
    return (
        f"{s['schedule_id']}  {s['name']:<20} {s['cron']:<16} {s['timezone']:<14} "
        f"{s['deployment']:<12} {state}"
    )


# -- schedules ---------------------------------------------------------------------------


@schedule_app.command("create")
def schedule_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A name, unique in the workspace.")],
    cron: Annotated[str, typer.Argument(help="5 fields, or 6 with seconds last.")],
    prompt: Prompt,
    deployment: Deployment = "default",
    timezone: Annotated[str, typer.Option("--tz", help="IANA time zone.")] = "UTC",
    misfire: Annotated[
        str, typer.Option(help="After downtime: skip missed slots, or run_once.")
    ] = "skip",
    session: Annotated[
        str | None, typer.Option("--session", help="Continue this session every fire.")
    ] = None,
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """Create a schedule; `{{ fire_time }}` and `{{ schedule }}` fill its prompt."""
    payload = {"name": name, "cron": cron, "prompt": prompt, "deployment": deployment,
               "timezone": timezone, "misfire": misfire, "session_id": session}  # fmt: skip

    async def body(client: Client, cfg: Settings) -> int:
        doc = await client.create_schedule(payload, workspace_id=workspace or None)
        emit(cfg, json_out, doc, f"schedule {doc['schedule_id']} created; {_line(doc)}")
        return 0

    execute(ctx, body)


@schedule_app.command("list")
def schedule_list(
    ctx: typer.Context, workspace: Workspace = None, json_out: JsonFlag = False
) -> None:
    """The workspace's schedules and their next fire."""

    async def body(client: Client, cfg: Settings) -> int:
        schedules = await client.schedules(workspace_id=workspace or None)
        emit_items(cfg, json_out, schedules, _line, empty="no schedules")
        return 0

    execute(ctx, body)


def _schedule_action(
    ctx: typer.Context, schedule_id: str, action: Literal["pause", "resume"], json_out: bool
) -> None:
    async def body(client: Client, cfg: Settings) -> int:
        move = client.pause_schedule if action == "pause" else client.resume_schedule
        doc = await move(schedule_id)
        emit(cfg, json_out, doc, _line(doc))
        return 0

    execute(ctx, body)


@schedule_app.command("pause")
def schedule_pause(ctx: typer.Context, schedule_id: str, json_out: JsonFlag = False) -> None:
    """Stop firing (until resumed)."""
    _schedule_action(ctx, schedule_id, "pause", json_out)


@schedule_app.command("resume")
def schedule_resume(ctx: typer.Context, schedule_id: str, json_out: JsonFlag = False) -> None:
    """Fire again from the next slot after now (paused slots are not caught up)."""
    _schedule_action(ctx, schedule_id, "resume", json_out)


@schedule_app.command("delete")
def schedule_delete(ctx: typer.Context, schedule_id: str) -> None:
    """Delete a schedule (its past runs stay)."""

    async def body(client: Client, cfg: Settings) -> int:
        await client.delete_schedule(schedule_id)
        cfg.stdout.print(SafeText(f"schedule {schedule_id} deleted"))
        return 0

    execute(ctx, body)


@schedule_app.command("runs")
def schedule_runs(
    ctx: typer.Context,
    schedule_id: str,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20,
    json_out: JsonFlag = False,
) -> None:
    """Each fire: its slot, its lag, its session and how its turn stands."""

    async def body(client: Client, cfg: Settings) -> int:
        runs = await client.schedule_runs(schedule_id, limit=limit)
        emit_items(cfg, json_out, runs, _run_line, empty="no runs yet")
        return 0

    execute(ctx, body)


# -- hooks -------------------------------------------------------------------------------


@hook_app.command("create")
def hook_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A name, unique in the workspace.")],
    prompt: Prompt,
    deployment: Deployment = "default",
    max_bytes: Annotated[int, typer.Option(help="The largest payload accepted.")] = 65536,
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """Create a webhook; prints its URL and signing secret (shown this once only).
    `{{ payload.field }}` fills the prompt from the delivery's JSON."""
    payload = {"name": name, "prompt": prompt, "deployment": deployment, "max_bytes": max_bytes}

    async def body(client: Client, cfg: Settings) -> int:
        doc = await client.create_hook(payload, workspace_id=workspace or None)
        if json_out:
            write_line(json.dumps(doc, sort_keys=True))
            return 0
        cfg.stdout.print(SafeText(f"hook {doc['hook_id']} created"))
        cfg.stdout.print(SafeText(f"url:    {doc['url']}"))
        cfg.stdout.print(SafeText(f"secret: {doc['secret']}"))
        cfg.stdout.print("the secret is shown only now: give it to the sender")
        return 0

    execute(ctx, body)


@hook_app.command("list")
def hook_list(ctx: typer.Context, workspace: Workspace = None, json_out: JsonFlag = False) -> None:
    """The workspace's hooks and their URLs (never their secrets)."""

    async def body(client: Client, cfg: Settings) -> int:
        hooks = await client.hooks(workspace_id=workspace or None)
        emit_items(cfg, json_out, hooks, _hook_line, empty="no hooks")
        return 0

    execute(ctx, body)


@hook_app.command("delete")
def hook_delete(ctx: typer.Context, hook_id: str) -> None:
    """Delete a hook and its secret: later deliveries are refused (401)."""

    async def body(client: Client, cfg: Settings) -> int:
        await client.delete_hook(hook_id)
        cfg.stdout.print(SafeText(f"hook {hook_id} deleted"))
        return 0

    execute(ctx, body)


def _run_line(r: RunDoc) -> str:
    error = r.get("error")
    why = f" ({error['code']}: {error['message']})" if error else ""
    return (
        f"{r['fire_time']}  +{r['lag_seconds']:.3f}s  {r['session_id'] or '-'}  "
        f"{r['status'] or '?'}{why}"
    )


def _hook_line(h: HookDoc) -> str:
    return f"{h['hook_id']}  {h['name']:<20} {h['deployment']:<12} {h['url']}"
