"""`nua run` and `nua attach`: start or watch a task live. The work belongs to the session,
not to this process: detaching (or Ctrl-C) leaves it running on the server."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Literal

import typer

from opennua.client import Client

from ._context import ExitCode, Settings, execute, fail, settings, write_line
from ._live import Follower
from ._safe import SafeText

IfBusy = Literal["reject", "enqueue", "interrupt"]


class _Attached:
    """What Ctrl-C needs to say how to come back."""

    session_id: str | None = None


def _detached(config: Settings, attached: _Attached) -> int:
    if attached.session_id is None:
        config.stderr.print("interrupted before the task was accepted; nothing was started")
        return ExitCode.DETACHED
    config.stderr.print(
        SafeText.assemble(
            "\n",
            ("detached", "bold"),
            ": the task keeps running on the server.\n"
            f"  re-attach: nua attach {attached.session_id}\n"
            f"  inspect:   nua show {attached.session_id}",
        ),
        soft_wrap=True,
    )
    return ExitCode.DETACHED


def _prompt_default(prompt: bool | None, json_lines: bool) -> bool:
    if json_lines:
        return False
    return sys.stdin.isatty() if prompt is None else prompt


async def run_task(
    client: Client,
    config: Settings,
    text: str,
    *,
    session_id: str | None,
    title: str | None,
    detach: bool,
    json_lines: bool,
    if_busy: IfBusy,
    prompt: bool,
    reasoning: bool,
    attached: _Attached,
    deployment: str | None = None,
    workspace: str | None = None,
) -> int:
    if session_id is None:
        session = await client.create_session(
            title or _title(text), deployment=deployment, workspace_id=workspace
        )
        after: int | None = 0
    else:
        session = client.session(session_id)
        after = None  # from a fresh snapshot: only what happens from now on
    attached.session_id = session.session_id
    if detach:
        accepted = await session.send_message(text, if_busy=if_busy)
        ids = {"session_id": session.session_id, **accepted.ids}
        if json_lines:
            write_line(json.dumps(ids, sort_keys=True))
        else:
            config.stdout.print(
                f"accepted · session {ids['session_id']} · turn {ids.get('turn_id')} · "
                f"execution {ids.get('execution_id')}\n"
                f"  watch:  nua attach {session.session_id}\n"
                f"  answer: nua answer {session.session_id} <request_id> --option <id>",
                soft_wrap=True,
                highlight=False,
            )
        return ExitCode.OK
    async with session.subscribe(after, replay_gaps=json_lines) as live:
        accepted = await session.send_message(text, if_busy=if_busy)
        if not json_lines:
            config.stderr.print(
                SafeText(
                    f"session {session.session_id} · turn {accepted.ids.get('turn_id')} · "
                    "Ctrl-C detaches (the task continues)",
                    style="dim",
                ),
                soft_wrap=True,
            )
        follower = Follower(
            session,
            config.stdout,
            config.stderr,
            turn_id=accepted.ids.get("turn_id"),
            prompt=prompt,
            json_lines=json_lines,
            reasoning=reasoning,
        )
        return await follower.run(live)


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:59] + "…"


def run(
    ctx: typer.Context,
    words: Annotated[
        list[str],
        typer.Argument(
            help="What to ask the agent, or a plugin's command: /name args.",
            metavar="TEXT...",
        ),
    ],
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Continue this session (SID).")
    ] = None,
    title: Annotated[str | None, typer.Option(help="Title of a new session.")] = None,
    deployment: Annotated[
        str | None,
        typer.Option(
            "--deployment", help="Run a new session on this deployment (default: default)."
        ),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Return once accepted; print the ids.")
    ] = False,
    json_lines: Annotated[
        bool, typer.Option("--json", help="Print every action as one JSON line.")
    ] = False,
    if_busy: Annotated[
        str, typer.Option(help="When a turn is active: enqueue | reject | interrupt.")
    ] = "enqueue",
    prompt: Annotated[
        bool | None,
        typer.Option(
            "--prompt/--no-prompt", help="Ask here when input is needed (default: on a TTY)."
        ),
    ] = None,
    reasoning: Annotated[
        bool, typer.Option("--reasoning", help="Show reasoning in full instead of folded.")
    ] = False,
    workspace: Annotated[
        str | None,
        typer.Option("--workspace", "-w", help="Workspace of a new session (default: your first)."),
    ] = None,
) -> None:
    """Start a task (in a new session, or --session SID) and follow it live."""
    config = settings(ctx)
    text = " ".join(words)  # `nua run /review-pr 123` needs no quotes
    if if_busy not in ("enqueue", "reject", "interrupt"):
        raise fail(config, "--if-busy must be enqueue, reject or interrupt")
    if deployment is not None and session is not None:
        raise fail(config, "--deployment starts a new session; it cannot be used with --session")
    attached = _Attached()
    execute(
        ctx,
        lambda client, cfg: run_task(
            client,
            cfg,
            text,
            session_id=session,
            title=title,
            detach=detach,
            json_lines=json_lines,
            if_busy=if_busy,  # type: ignore[arg-type]
            prompt=_prompt_default(prompt, json_lines),
            reasoning=reasoning,
            attached=attached,
            deployment=deployment,
            workspace=workspace,
        ),
        on_interrupt=lambda: _detached(config, attached),
    )


async def attach_session(
    client: Client,
    config: Settings,
    session_id: str,
    *,
    after: int | None,
    json_lines: bool,
    prompt: bool,
    reasoning: bool,
    follow: bool,
) -> int:
    session = client.session(session_id)
    # Replaying from --after N must reach today's log before "nothing runs" means done.
    until_seq = (await session.snapshot())[0] if after is not None else 0
    async with session.subscribe(after, replay_gaps=json_lines) as live:
        follower = Follower(
            session,
            config.stdout,
            config.stderr,
            until_seq=until_seq,
            prompt=prompt,
            json_lines=json_lines,
            reasoning=reasoning,
            follow=follow,
        )
        return await follower.run(live)


def attach(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="SID", help="The session to watch.")],
    after: Annotated[
        int | None,
        typer.Option(help="Start after this seq (with --json: print every action after it)."),
    ] = None,
    json_lines: Annotated[
        bool, typer.Option("--json", help="Print every action as one JSON line.")
    ] = False,
    prompt: Annotated[
        bool | None,
        typer.Option(
            "--prompt/--no-prompt", help="Ask here when input is needed (default: on a TTY)."
        ),
    ] = None,
    reasoning: Annotated[bool, typer.Option("--reasoning", help="Show reasoning in full.")] = False,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep watching for new turns.")
    ] = False,
) -> None:
    """Watch a session live from now (or --after N) until its current turn ends."""
    config = settings(ctx)
    if after is not None and after < 0:
        raise fail(config, "--after must be >= 0")
    attached = _Attached()
    attached.session_id = session_id
    execute(
        ctx,
        lambda client, cfg: attach_session(
            client,
            cfg,
            session_id,
            after=after,
            json_lines=json_lines,
            prompt=_prompt_default(prompt, json_lines),
            reasoning=reasoning,
            follow=follow,
        ),
        on_interrupt=lambda: _detached(config, attached),
    )
