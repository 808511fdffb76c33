"""`nua subscription create|list|show|delete|deliveries|replay` (docs/subscriptions.md).
Each is one API call; errors map to the documented exit codes.

`nua subscription create` prints the subscription's signing secret once: the server keeps
it sealed and never shows it again.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from opennua.client import Client
from opennua.client.responses import EventDeliveryDoc, SubscriptionDoc

from ._context import Settings, emit_items, execute, write_line
from ._safe import SafeText

subscription_app = typer.Typer(
    no_args_is_help=True, help="Event subscriptions: a workspace's actions POSTed to a URL."
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Workspace = Annotated[
    str | None, typer.Option("--workspace", "-w", help="Default: your first workspace.")
]


def _line(s: SubscriptionDoc) -> str:
    scope = ",".join(f"{k}={s[k]}" for k in ("deployment", "session_id") if s.get(k) is not None)
    state = s["state"] if s["state"] == "active" else f"disabled ({s['disabled_reason']})"
    return (
        f"{s['subscription_id']}  {s['url']}  {','.join(s['events'])}  {scope or 'workspace'}"
        f"  {state}"
    )


@subscription_app.command("create")
def subscription_create(
    ctx: typer.Context,
    url: Annotated[str, typer.Argument(help="Where deliveries are POSTed (http or https).")],
    events: Annotated[
        str,
        typer.Option(
            "--events", "-e", help="Comma-separated action types: turn.ended,input.requested"
        ),
    ],
    deployment: Annotated[
        str | None, typer.Option("--deployment", "-d", help="Only this deployment's sessions.")
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Only this session.")] = None,
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """Subscribe URL to a workspace's events; prints the id and the `whsec_` signing
    secret (shown this once only)."""
    payload = {
        "url": url,
        "events": [e.strip() for e in events.split(",") if e.strip()],
        "deployment": deployment,
        "session_id": session,
    }

    async def body(client: Client, cfg: Settings) -> int:
        doc = await client.create_subscription(payload, workspace_id=workspace or None)
        if json_out:
            write_line(json.dumps(doc, sort_keys=True))
            return 0
        cfg.stdout.print(SafeText(f"subscription {doc['subscription_id']} created"))
        cfg.stdout.print(SafeText(f"secret: {doc['secret']}"))
        cfg.stdout.print("the secret is shown only now: give it to the receiver")
        return 0

    execute(ctx, body)


@subscription_app.command("list")
def subscription_list(
    ctx: typer.Context, workspace: Workspace = None, json_out: JsonFlag = False
) -> None:
    """The workspace's subscriptions (never their secrets)."""

    async def body(client: Client, cfg: Settings) -> int:
        found = await client.subscriptions(workspace_id=workspace or None)
        emit_items(cfg, json_out, found, _line, empty="no subscriptions")
        return 0

    execute(ctx, body)


@subscription_app.command("show")
def subscription_show(ctx: typer.Context, subscription_id: str, json_out: JsonFlag = False) -> None:
    """One subscription."""

    async def body(client: Client, cfg: Settings) -> int:
        doc = await client.subscription(subscription_id)
        if json_out:
            write_line(json.dumps(doc, sort_keys=True))
        else:
            cfg.stdout.print(SafeText(_line(doc)))
            cfg.stdout.print(SafeText(f"created {doc['created_at']} by {doc['created_by']}"))
        return 0

    execute(ctx, body)


@subscription_app.command("delete")
def subscription_delete(ctx: typer.Context, subscription_id: str) -> None:
    """Delete a subscription, what it still owed and its secret."""

    async def body(client: Client, cfg: Settings) -> int:
        await client.delete_subscription(subscription_id)
        cfg.stdout.print(SafeText(f"subscription {subscription_id} deleted"))
        return 0

    execute(ctx, body)


@subscription_app.command("deliveries")
def subscription_deliveries(
    ctx: typer.Context,
    subscription_id: str,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20,
    json_out: JsonFlag = False,
) -> None:
    """Recent deliveries: event, state, attempts, last status or error."""

    async def body(client: Client, cfg: Settings) -> int:
        found = await client.subscription_deliveries(subscription_id, limit=limit)
        emit_items(cfg, json_out, found, _delivery_line, empty="no deliveries")
        return 0

    execute(ctx, body)


@subscription_app.command("replay")
def subscription_replay(
    ctx: typer.Context,
    subscription_id: str,
    event: Annotated[
        str | None, typer.Option("--event", help="Deliver this event (evt_…) again.")
    ] = None,
    from_seq: Annotated[
        int | None, typer.Option("--from", help="Deliver again from this seq of the log.")
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="The session whose log --from reads.")
    ] = None,
) -> None:
    """Deliver again from the log: one event, or a session's events from a seq."""
    if (event is None) == (from_seq is None) or (from_seq is None) != (session is None):
        typer.echo("error: name --event EVT_ID, or --from SEQ and --session SID", err=True)
        raise typer.Exit(2)
    payload: dict[str, object] = (
        {"event_id": event} if event is not None else {"from_seq": from_seq, "session_id": session}
    )

    async def body(client: Client, cfg: Settings) -> int:
        await client.request("POST", f"/v1/subscriptions/{subscription_id}/replay", json=payload)
        cfg.stdout.print(SafeText(f"subscription {subscription_id}: replay queued"))
        return 0

    execute(ctx, body)


def _delivery_line(d: EventDeliveryDoc) -> str:
    last = d["last_error"] or (d["last_status"] and f"HTTP {d['last_status']}") or "-"
    return (
        f"{d['event_id']}  {d['event_type']:<22} {d['session_id']}#{d['seq']}  "
        f"{d['state']:<9} attempts={d['attempts']}  {last}"
    )
