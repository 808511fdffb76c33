"""`nua serve`: the embedded server (or one role of a scaled-out deployment)."""

from __future__ import annotations

import asyncio
import re
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
    max_executions: Annotated[
        int,
        typer.Option(
            envvar="NUA_MAX_EXECUTIONS",
            help="Executions this process runs at once; more wait queued (a turn waiting "
            "for an answer takes no slot)",
        ),
    ] = 8,
    sandbox: Annotated[
        str,
        typer.Option(
            envvar="NUA_SANDBOX",
            help="How shell commands and local MCP servers run: auto (bubblewrap, else "
            "Landlock) | bwrap | landlock | none (unconfined)",
        ),
    ] = "auto",
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
    workspace_quota: Annotated[
        str,
        typer.Option(
            help="Bytes of plugin files each workspace may upload (K, M, G, T suffixes "
            "are powers of 1024: 500MiB, 5G); 0: no limit"
        ),
    ] = "5GiB",
    allow_private_subscriptions: Annotated[
        bool,
        typer.Option(
            help="Deliver event subscriptions to loopback and private addresses too "
            "(default: public addresses only)"
        ),
    ] = False,
    subscription_retry_base: Annotated[
        float,
        typer.Option(
            help="Seconds before a failed subscription delivery's first retry; each "
            "next waits twice as long (with jitter), up to an hour"
        ),
    ] = 5.0,
    db_wait: Annotated[
        float,
        typer.Option(
            help="Seconds to wait for PostgreSQL at startup (a restart in progress) "
            "before exiting 69"
        ),
    ] = 60.0,
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
    if sandbox not in ("auto", "bwrap", "landlock", "none"):
        typer.echo(
            f"error: --sandbox must be auto, bwrap, landlock or none, not {sandbox!r}", err=True
        )
        raise typer.Exit(2)
    if max_executions < 1:
        typer.echo(f"error: --max-executions must be at least 1, not {max_executions}", err=True)
        raise typer.Exit(2)
    quota = parse_size(workspace_quota)
    if quota is None:
        typer.echo(f"error: --workspace-quota must be a size such as 5GiB, not {workspace_quota!r}",
                   err=True)  # fmt: skip
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
        max_executions=max_executions,
        sandbox=sandbox,
        allowed_hosts=tuple(allowed_host or ()),
        blobs=blobs,
        gateway_url=gateway_url,
        workspace_retention=workspace_retention,
        workspace_quota=quota or None,
        allow_private_subscriptions=allow_private_subscriptions,
        subscription_retry_base=subscription_retry_base,
        db_wait=db_wait,
    )
    asyncio.run(serve(config))


_SIZE = re.compile(r"(\d+)\s*(?:([KMGT])(?:i?B)?|B)?", re.IGNORECASE)


def parse_size(text: str) -> int | None:
    """Bytes from `5GiB`, `500M`, `1024` (suffixes are powers of 1024); None if not a size."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        return None
    unit = (match.group(2) or "").upper()
    power = "KMGT".index(unit) + 1 if unit else 0
    return int(match.group(1)) << (10 * power)


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
