"""`nua answer`, `nua cancel`, `nua retry`: intents. The Host decides; these report what it
decided (a lost race to answer exits 4 and names the client that answered first)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from opennua.client import Client

from ._context import Settings, execute, fail, settings, write_line


def answer(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="SID")],
    request_id: Annotated[str, typer.Argument(metavar="RID", help="The input request id.")],
    option: Annotated[
        str | None, typer.Option("--option", help="One of the offered option ids.")
    ] = None,
    text: Annotated[str | None, typer.Option("--text", help="A free-text answer.")] = None,
    payload: Annotated[
        str | None, typer.Option("--payload", help="A JSON answer (for a response schema).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the resolution as JSON.")] = False,
) -> None:
    """Answer an input request. First answer wins; a later one exits 4 and says who won."""
    config = settings(ctx)
    given = [x for x in (option, text, payload) if x is not None]
    if len(given) != 1:
        raise fail(config, "give exactly one of --option, --text or --payload")
    value: Any = None
    if text is not None:
        value = text
    elif payload is not None:
        try:
            value = json.loads(payload)
        except ValueError as exc:
            raise fail(config, f"--payload is not JSON: {exc}") from None

    async def body(client: Client, cfg: Settings) -> int:
        session = client.session(session_id)
        if option is not None:
            resolution = await session.answer(request_id, option_id=option)
        else:
            resolution = await session.answer(request_id, payload=value)
        if json_out:
            write_line(json.dumps(resolution, sort_keys=True))
        else:
            choice = resolution.get("option_id") or json.dumps(resolution.get("payload"))
            cfg.stdout.print(f"answered {request_id}: {choice}", soft_wrap=True)
        return 0

    execute(ctx, body)


def cancel(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="SID")],
    turn: Annotated[str | None, typer.Option("--turn", help="Only this turn.")] = None,
) -> None:
    """Cancel the session's active turn (the supervisor stops it and ends it `cancelled`)."""

    async def body(client: Client, cfg: Settings) -> int:
        accepted = await client.session(session_id).cancel(turn)
        cfg.stdout.print(
            f"cancel requested · turn {accepted.ids.get('turn_id')} · "
            f"execution {accepted.ids.get('execution_id')}",
            soft_wrap=True,
        )
        return 0

    execute(ctx, body)


def retry(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="SID")],
    turn_id: Annotated[str, typer.Argument(metavar="TURN", help="The ended turn to run again.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the new ids as JSON.")] = False,
) -> None:
    """Run an ended turn again: a new turn and execution with `retry_of`."""

    async def body(client: Client, cfg: Settings) -> int:
        accepted = await client.session(session_id).retry(turn_id)
        if json_out:
            write_line(json.dumps({"session_id": session_id, **accepted.ids}, sort_keys=True))
        else:
            cfg.stdout.print(
                f"retrying {turn_id} · new turn {accepted.ids.get('turn_id')} · "
                f"execution {accepted.ids.get('execution_id')}\n"
                f"  watch: nua attach {session_id}",
                soft_wrap=True,
            )
        return 0

    execute(ctx, body)
