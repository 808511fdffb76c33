"""The Typer application; each command group lives in its own module."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from opennua.cli._acp import acp
from opennua.cli._auth import (
    admin_app,
    agent_app,
    login,
    member_app,
    token_app,
    user_app,
    whoami,
    workspace_app,
)
from opennua.cli._automation import hook_app, schedule_app
from opennua.cli._bridge import bridge_app
from opennua.cli._context import EXIT_CODES_HELP, Settings
from opennua.cli._demo import demo
from opennua.cli._globals import RootGroup
from opennua.cli._intents import answer, cancel, retry
from opennua.cli._plugins import deploy, deployment_app, deployments, plugin_app
from opennua.cli._read import (
    artifact_app,
    artifacts,
    diff,
    history,
    sessions,
    show,
    trace,
    usage,
)
from opennua.cli._run import attach, run
from opennua.cli._schema import schema
from opennua.cli._secrets import audit, secret_app
from opennua.cli._serve import rotate_key_command, serve_command
from opennua.cli._subscriptions import subscription_app

app = typer.Typer(
    name="nua",
    no_args_is_help=True,
    add_completion=False,
    epilog=EXIT_CODES_HELP,
    rich_markup_mode=None,
    cls=RootGroup,
)
app.command(name="serve")(serve_command)
app.command()(demo)
app.command()(run)
app.command()(attach)
app.command()(answer)
app.command()(sessions)
app.command()(show)
app.command()(history)
app.command()(usage)
app.command()(trace)
app.command()(cancel)
app.command()(retry)
app.command()(artifacts)
app.command()(diff)
app.add_typer(artifact_app, name="artifact")
app.add_typer(bridge_app, name="bridge")
app.command()(schema)
app.add_typer(plugin_app, name="plugin")
app.command()(deploy)
app.command()(deployments)
app.add_typer(deployment_app, name="deployment")
app.command()(login)
app.command()(whoami)
app.add_typer(workspace_app, name="workspace")
app.add_typer(user_app, name="user")
app.add_typer(member_app, name="member")
app.add_typer(agent_app, name="agent-principal")
app.add_typer(token_app, name="token")
app.add_typer(admin_app, name="admin")
secret_app.command("rotate-key")(rotate_key_command)
app.add_typer(secret_app, name="secret")
app.command()(audit)
app.add_typer(schedule_app, name="schedule")
app.add_typer(hook_app, name="hook")
app.add_typer(subscription_app, name="subscription")
app.command()(acp)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # only here: not on every command's start

        typer.echo(f"nua {version('opennua')}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(envvar="NUA_URL", help="Server URL (default: DATA/url, else :7421)."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="NUA_TOKEN", help="Bearer token (default: from `nua login`, else DATA/token)."
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(envvar="NUA_DATA", help="Data directory (default ~/.nua)."),
    ] = None,
    client_id: Annotated[
        str | None,
        typer.Option(envvar="NUA_CLIENT_ID", help="This client's id (default: a new cli_ id)."),
    ] = None,
    _version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """opennua: a durable runtime for long-running AI agents.

    Start the embedded server with `nua serve`, then `nua run "…"` in another terminal;
    or try everything at once with `nua demo`. The options above go before or after the
    command (`nua run --url URL "…"`), except where the command has one of that name.
    """
    ctx.obj = Settings(url_option=url, token_option=token, data_option=data, client_id=client_id)


def main() -> None:
    app()
