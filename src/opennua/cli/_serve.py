"""`nua serve`: the embedded server (or one role of a scaled-out deployment)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer

from opennua.cli._context import DEFAULT_PORT, default_data_dir, settings


def serve_command(
    role: Annotated[str, typer.Option(help="all | host | supervisor | gateway")] = "all",
    db: Annotated[
        str | None, typer.Option(help="sqlite:///PATH or postgresql://… (default: DATA/nua.db)")
    ] = None,
    data: Annotated[Path | None, typer.Option(help="Data directory (default ~/.nua)")] = None,
    blobs: Annotated[
        str | None,
        typer.Option(
            help="file:///DIR or s3://BUCKET/PREFIX (default: DATA/blobs on SQLite, "
            "the database on PostgreSQL)"
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = DEFAULT_PORT,
    model: Annotated[
        str | None, typer.Option(help="provider:model (default NUA_MODEL or scripted:demo)")
    ] = None,
    lease_ttl: Annotated[float, typer.Option(help="Execution lease TTL in seconds")] = 15.0,
    sandbox: Annotated[
        str,
        typer.Option(help="How shell commands run: bwrap (bubblewrap) | none (unconfined)"),
    ] = "bwrap",
    workspace_retention: Annotated[
        float,
        typer.Option(
            help="Seconds the workspace of an ended session is kept before its blobs are "
            "collected (artifacts are kept); 0 keeps them forever. Default: 7 days"
        ),
    ] = 7 * 24 * 3600.0,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="Also accept requests with this Host (NAME or NAME:PORT; * for any); "
            "repeatable. Default: the bound address, localhost and 127.0.0.1 with the port"
        ),
    ] = None,
    gateway_url: Annotated[
        str | None,
        typer.Option(
            envvar="NUA_GATEWAY_URL",
            help="Where supervisors reach the gateway (--role all: its own, in-process)",
        ),
    ] = None,
) -> None:
    """Run the host, the supervisor, the gateway and the web UI (embedded SQLite by default)."""
    # Imported here: the server stack (FastAPI, the runtime, the stores) takes seconds to
    # import, and every other command is a small client that needs none of it.
    from opennua.server import ServeConfig, serve

    if role not in ("all", "host", "supervisor", "gateway"):
        typer.echo(
            f"error: --role must be all, host, supervisor or gateway, not {role!r}", err=True
        )
        raise typer.Exit(2)
    if sandbox not in ("bwrap", "none"):
        typer.echo(f"error: --sandbox must be bwrap or none, not {sandbox!r}", err=True)
        raise typer.Exit(2)
    data_dir = data or default_data_dir()
    config = ServeConfig(
        data_dir=data_dir,
        db=db,
        role=role,  # type: ignore[arg-type]
        host=host,
        port=port,
        model=model,
        lease_ttl=lease_ttl,
        sandbox=sandbox,  # type: ignore[arg-type]
        allowed_hosts=tuple(allowed_host or ()),
        blobs=blobs,
        gateway_url=gateway_url,
        workspace_retention=workspace_retention,
    )
    asyncio.run(serve(config))


def rotate_key_command(
    ctx: typer.Context,
    db: Annotated[
        str | None, typer.Option(help="sqlite:///PATH or postgresql://… (default: DATA/nua.db)")
    ] = None,
    data: Annotated[Path | None, typer.Option(help="Data directory (default ~/.nua)")] = None,
    new_key_stdin: Annotated[
        bool,
        typer.Option(
            "--new-key-stdin",
            help="With NUA_SECRET_KEY set: read the new key from stdin (then set the "
            "variable to it).",
        ),
    ] = False,
) -> None:
    """Re-encrypt every secret under a new key (DATA/secret.key is replaced). Stop the
    servers first, or restart them after: one holding the old key refuses secrets."""
    from opennua.server import ServeConfig, rotate_secret_key

    new_key = sys.stdin.readline().strip() if new_key_stdin else None
    config = ServeConfig(data_dir=data or settings(ctx).data_dir, db=db)
    try:
        count = asyncio.run(rotate_secret_key(config, new_key))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(7) from None  # rejected (docs/cli.md, exit codes)
    typer.echo(f"re-encrypted {count} secret(s) under the new key")
