"""`nua serve`: the embedded server (or one role of a scaled-out deployment)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from opennua.cli._context import DEFAULT_PORT, default_data_dir, write_url_file


def serve_command(
    role: Annotated[str, typer.Option(help="all | host | supervisor")] = "all",
    db: Annotated[
        str | None, typer.Option(help="sqlite:///PATH or postgresql://… (default: DATA/nua.db)")
    ] = None,
    data: Annotated[Path | None, typer.Option(help="Data directory (default ~/.nua)")] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = DEFAULT_PORT,
    model: Annotated[
        str | None, typer.Option(help="provider:model (default NUA_MODEL or scripted:demo)")
    ] = None,
    lease_ttl: Annotated[float, typer.Option(help="Execution lease TTL in seconds")] = 15.0,
) -> None:
    """Run the host, the supervisor and the web UI (embedded SQLite by default)."""
    # Imported here: the server stack (FastAPI, the runtime, the stores) takes seconds to
    # import, and every other command is a small client that needs none of it.
    from opennua.server._serve import ServeConfig, serve

    if role not in ("all", "host", "supervisor"):
        typer.echo(f"error: --role must be all, host or supervisor, not {role!r}", err=True)
        raise typer.Exit(2)
    data_dir = data or default_data_dir()
    if role in ("all", "host"):
        # So `nua run` and friends on this data directory find the server without --url.
        write_url_file(data_dir, host, port)
    config = ServeConfig(
        data_dir=data_dir,
        db=db,
        role=role,  # type: ignore[arg-type]
        host=host,
        port=port,
        model=model,
        lease_ttl=lease_ttl,
    )
    asyncio.run(serve(config))
