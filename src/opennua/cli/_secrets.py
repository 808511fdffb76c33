"""`nua secret set|list|delete|rotate-key` (docs/secrets.md).

A value is read from stdin (piped) or a hidden prompt, never from argv: argv is visible to
every user of the machine (`ps`) and lands in shell history. Nothing prints a value.
`rotate-key` is the operator's: it runs against the data directory's store and key, not
through the API (`cli/_serve.py`: only there does the CLI reach the server's code).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from opennua.client import Client
from opennua.client.responses import AuditDoc, SecretDoc

from ._context import Settings, emit, emit_items, execute, fail, settings
from ._safe import SafeText

secret_app = typer.Typer(
    help="Workspace secrets: set, list, delete (values are never shown); rotate the key.",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Workspace = Annotated[
    str | None, typer.Option("--workspace", "-w", help="Default: your first workspace.")
]


@secret_app.command("set")
def secret_set(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The secret's name (deployments refer to it).")],
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """Create or replace a secret. The value comes from stdin, else a hidden prompt."""
    cfg = settings(ctx)
    if sys.stdin.isatty():
        value = typer.prompt(f"value of {name}", hide_input=True, confirmation_prompt=True)
    else:
        value = sys.stdin.read()
        # One trailing newline is how `echo` and files end; it is not part of a token.
        value = value[:-1] if value.endswith("\n") else value
        value = value[:-1] if value.endswith("\r") else value
    if not value:
        raise fail(cfg, "no value given on stdin")

    async def body(client: Client, cfg: Settings) -> int:
        doc = await client.set_secret(name, value, workspace_id=workspace or None)
        emit(cfg, json_out, doc, f"secret {doc['name']} saved")
        return 0

    execute(ctx, body)


@secret_app.command("list")
def secret_list(
    ctx: typer.Context, workspace: Workspace = None, json_out: JsonFlag = False
) -> None:
    """Names, creation and last use: never values."""

    async def body(client: Client, cfg: Settings) -> int:
        items = await client.secrets(workspace_id=workspace or None)
        emit_items(cfg, json_out, items, _secret_line, empty="no secrets")
        return 0

    execute(ctx, body)


@secret_app.command("delete")
def secret_delete(ctx: typer.Context, name: str, workspace: Workspace = None) -> None:
    """Delete a secret (deployments that name it fail their tool calls until it is set)."""

    async def body(client: Client, cfg: Settings) -> int:
        await client.delete_secret(name, workspace_id=workspace or None)
        cfg.stdout.print(SafeText(f"secret {name} deleted"))
        return 0

    execute(ctx, body)


def audit(
    ctx: typer.Context,
    execution: Annotated[
        str | None, typer.Option("--execution", help="Only this execution's calls.")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 100,
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """The gateway's calls (admins): who, which execution and tool, which credential by
    name, the outcome and its latency."""

    async def body(client: Client, cfg: Settings) -> int:
        items = await client.audit(
            workspace_id=workspace or None, execution_id=execution, limit=limit
        )
        emit_items(cfg, json_out, items, _audit_line, empty="no gateway calls")
        return 0

    execute(ctx, body)


def _secret_line(s: SecretDoc) -> str:
    used = s["last_used_at"] or "never used"
    return f"{s['name']:<24} created {s['created_at']}  {used}"


def _audit_line(a: AuditDoc) -> str:
    what = f"{a['server']}__{a['tool']}" if a["tool"] else a["server"]
    if a["kind"] == "egress":  # a connection through the egress proxy
        where = f"{a['host']}:{a['port']}" if a["port"] is not None else "(no request)"
        what = f"egress {where} up {a['bytes_up']} B down {a['bytes_down']} B"
    outcome = a["outcome"] + (f" ({a['code']})" if a["code"] else "")
    return (
        f"{a['at']}  {a['execution_id'] or '-'}  {a['principal_id'] or '-'}  {what}  "
        f"credential {a['credential'] or '-'}  {outcome}  {a['latency_ms']:.1f} ms"
    )
