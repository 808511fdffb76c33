"""`nua acp`: be an editor's ACP agent over stdin/stdout, as a client of a running server."""

from __future__ import annotations

from typing import Annotated

import typer

from opennua.client import Client

from ._context import execute


async def _serve(client: Client, deployment: str | None) -> int:
    # Imported by the command that runs it: every other `nua` command starts without ACP.
    from opennua.protocols.acp import serve_stdio

    await client.whoami()  # a wrong URL or token fails here, once, with its exit code
    await serve_stdio(client, deployment)
    return 0


def acp(
    ctx: typer.Context,
    deployment: Annotated[
        str | None,
        typer.Option("--deployment", help="New sessions run this deployment (default: default)."),
    ] = None,
) -> None:
    """Speak ACP (Agent Client Protocol) on stdin/stdout for an editor, until it closes
    stdin. Its sessions run on the server: they go on when the editor quits."""
    execute(ctx, lambda client, _cfg: _serve(client, deployment))
