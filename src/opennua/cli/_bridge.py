"""`nua bridge …`: run a chat bridge as its own process, or a local homeserver to try it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path
from typing import Annotated

import typer

from ._context import ExitCode, Settings, fail, settings

bridge_app = typer.Typer(name="bridge", help="Chat bridges (docs/bridge.md).", no_args_is_help=True)

TOKEN_ENV = "NUA_MATRIX_TOKEN"


@bridge_app.command()
def matrix(
    ctx: typer.Context,
    homeserver: Annotated[str, typer.Option(help="The homeserver's base URL.")],
    user: Annotated[str, typer.Option(help="The bot's Matrix user id, @bot:server.")],
    token_file: Annotated[
        Path | None,
        typer.Option(help=f"A file holding the bot's access token (else ${TOKEN_ENV})."),
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option(help="The bridge's state file (default: DATA/bridge-matrix.db)."),
    ] = None,
    member: Annotated[
        list[str] | None,
        typer.Option(
            help="MATRIX_ID=PRINCIPAL_ID: who a chat user is in opennua (repeat). Given, "
            "only listed people whose role may act steer; default: anyone in the room."
        ),
    ] = None,
    if_busy: Annotated[
        str, typer.Option(help="A new room's default for messages during a turn.")
    ] = "enqueue",
    edit_interval: Annotated[
        float, typer.Option(help="Seconds between two edits of a progress card.", min=0.5)
    ] = 2.0,
) -> None:
    """Bridge Matrix rooms to sessions until interrupted. The token never goes on argv."""
    # Imported by the command that runs it: every other `nua` command (`nua serve` too)
    # starts without the bridge and its Matrix client.
    from opennua.bridge import BridgeConfig, MatrixBridge, tracer_provider_from_env

    cfg = settings(ctx)
    token = _token(token_file)
    if token is None:
        raise fail(cfg, f"no access token: pass --token-file or set {TOKEN_ENV}")
    if if_busy not in ("reject", "enqueue", "interrupt"):
        raise fail(cfg, f"--if-busy must be reject, enqueue or interrupt, not {if_busy!r}")
    config = BridgeConfig(
        homeserver=homeserver,
        user_id=user,
        token=token,
        host_url=cfg.url,
        host_token=cfg.token,
        state_path=state or cfg.data_dir / "bridge-matrix.db",
        members=_members(cfg, member or []),
        if_busy=if_busy,
        edit_interval=edit_interval,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cfg.stderr.print(f"bridging {user} on {homeserver} to {cfg.url}")
    # Off unless OTEL_* says so (docs/observability.md): deliveries as spans of their turns.
    provider = tracer_provider_from_env(os.environ)
    if provider is not None:
        # Stopped by SIGTERM, the spans still queued are exported (as at Ctrl-C).
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(MatrixBridge(config, tracer_provider=provider).run())
    finally:
        if provider is not None:
            provider.shutdown()
    raise typer.Exit(ExitCode.OK)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _token(path: Path | None) -> str | None:
    if path is not None:
        try:
            return path.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None
    return os.environ.get(TOKEN_ENV) or None


@bridge_app.command()
def synapse(
    directory: Annotated[Path, typer.Option("--dir", help="Where Synapse keeps its files.")],
    port: Annotated[int, typer.Option(help="The loopback port to listen on.")] = 8008,
    bot: Annotated[str, typer.Option(help="The bot's localpart.")] = "nua",
    person: Annotated[str, typer.Option(help="Your localpart (password = localpart).")] = "me",
) -> None:
    """Run a local Synapse (SQLite, loopback) with a bot and a person, until interrupted
    (Ctrl-C or SIGTERM: Synapse stops with it)."""
    from opennua.bridge import Homeserver

    # SIGTERM ended this process at once and left Synapse running: stop as at Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    hs = Homeserver.prepare(directory, port)
    try:
        proc = hs.start()
    except KeyboardInterrupt:
        raise typer.Exit(ExitCode.OK) from None  # start() stopped what it had started
    try:
        login = hs.register(bot, os.urandom(12).hex())
        token_file = hs.dir / "bot.token"
        Homeserver.write_token(token_file, login["access_token"])
        hs.register(person, person)
        typer.echo(f"synapse on {hs.url}; log in as @{person}:localhost, password {person!r}")
        typer.echo(
            f"nua bridge matrix --homeserver {hs.url} --user {login['user_id']} "
            f"--token-file {token_file}"
        )
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        Homeserver.stop(proc)


def _members(cfg: Settings, pairs: list[str]) -> dict[str, str]:
    members: dict[str, str] = {}
    for pair in pairs:
        matrix_id, sep, principal = pair.partition("=")
        if not sep or not matrix_id.startswith("@") or not principal:
            raise fail(cfg, f"--member must be @user:server=PRINCIPAL_ID, not {pair!r}")
        members[matrix_id] = principal
    return members
