"""Who is who: `nua login`, `nua whoami`, `nua workspace`, `nua user`, `nua member`,
`nua agent-principal`, `nua token`. Thin over the HTTP API: the server decides who may
do what (a refusal is exit 8); `--json` prints the API's answer as is.

A token the server returns (a new user's, `token create`) is printed once, to stdout,
and never stored by the CLI except by `nua login`, in the 0600 credentials file.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from opennua.client import Client, connect

from ._context import Settings, execute, fail, settings, write_line
from ._credentials import save_credentials
from ._safe import SafeText

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Role = Annotated[
    str, typer.Option("--role", help="owner, admin, member or viewer.", show_default=True)
]
_ROLES = ("owner", "admin", "member", "viewer")

workspace_app = typer.Typer(help="Workspaces: create and list.", no_args_is_help=True)
user_app = typer.Typer(help="Users (people): add and list.", no_args_is_help=True)
member_app = typer.Typer(
    help="Memberships: a principal's role in a workspace.", no_args_is_help=True
)
agent_app = typer.Typer(help="Agent principals: identities of their own.", no_args_is_help=True)
token_app = typer.Typer(help="API tokens: create, list, revoke.", no_args_is_help=True)


# -- login, whoami ---------------------------------------------------------------------------


def login(
    ctx: typer.Context,
    url: Annotated[str, typer.Argument(metavar="URL", help="The server, e.g. https://nua.example")],
    token: Annotated[
        str | None, typer.Option("--token", help="Read from stdin when not given.")
    ] = None,
) -> None:
    """Check a token against a server and store it for that server (0600 file); that
    server becomes the default. `NUA_TOKEN` / `--token` on other commands still win."""
    config = settings(ctx)
    given = token or config.token_option
    if not given:
        if sys.stdin.isatty():
            given = typer.prompt("token", hide_input=True)
        else:
            given = sys.stdin.readline().strip()
    if not given:
        raise fail(config, "no token given")
    secret = given.strip()

    async def body(_: Client, cfg: Settings) -> int:
        async with connect(url, secret) as client:
            me = await client.get_json("/v1/whoami")
        path = save_credentials(url, secret)
        cfg.stdout.print(
            f"logged in to {url} as {me['name']} ({me['principal_id']}); saved in {path}"
        )
        return 0

    execute(ctx, body)


def whoami(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """Who the token in use stands for, and their role in each workspace."""

    async def body(client: Client, cfg: Settings) -> int:
        me = await client.get_json("/v1/whoami")
        if json_out:
            write_line(json.dumps(me, sort_keys=True))
            return 0
        cfg.stdout.print(
            f"{me['name']} ({me['kind']} {me['principal_id']}, token {me['token_id']})"
        )
        for w in me["workspaces"]:
            cfg.stdout.print(f"  {w['role']:<7} {w['name']} ({w['workspace_id']})")
        return 0

    execute(ctx, body)


# -- helpers ---------------------------------------------------------------------------------


async def _json(client: Client, method: str, path: str, **kwargs: Any) -> Any:
    response = await client.request(method, path, **kwargs)
    return response.json() if response.content else None


def _print(cfg: Settings, json_out: bool, value: Any, line: str) -> None:
    if json_out:
        write_line(json.dumps(value, sort_keys=True))
    else:
        cfg.stdout.print(SafeText(line))


def _check_role(config: Settings, role: str) -> None:
    if role not in _ROLES:
        raise fail(config, f"--role must be one of {', '.join(_ROLES)}")


# -- workspaces ------------------------------------------------------------------------------


@workspace_app.command("create")
def workspace_create(ctx: typer.Context, name: str, json_out: JsonFlag = False) -> None:
    """Create a workspace; you are its owner."""

    async def body(client: Client, cfg: Settings) -> int:
        w = await _json(client, "POST", "/v1/workspaces", json={"name": name})
        _print(cfg, json_out, w, f"{w['workspace_id']} {w['name']} (owner)")
        return 0

    execute(ctx, body)


@workspace_app.command("list")
def workspace_list(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """The workspaces you are a member of, with your role."""

    async def body(client: Client, cfg: Settings) -> int:
        page = await _json(client, "GET", "/v1/workspaces")
        if json_out:
            write_line(json.dumps(page, sort_keys=True))
            return 0
        for w in page["items"]:
            cfg.stdout.print(SafeText(f"{w['workspace_id']}  {w['role']:<7} {w['name']}"))
        return 0

    execute(ctx, body)


# -- users -----------------------------------------------------------------------------------


@user_app.command("add")
def user_add(ctx: typer.Context, name: str, json_out: JsonFlag = False) -> None:
    """Add a person (workspace admins may) and print their first token, once: hand it
    to them. They see nothing until `nua member add` gives them a role."""

    async def body(client: Client, cfg: Settings) -> int:
        u = await _json(client, "POST", "/v1/users", json={"name": name})
        if json_out:
            write_line(json.dumps(u, sort_keys=True))
        else:
            cfg.stdout.print(SafeText(f"{u['principal_id']} {u['name']}"))
            cfg.stdout.print(SafeText(f"token (shown once): {u['token']}"))
        return 0

    execute(ctx, body)


@user_app.command("list")
def user_list(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """Every user of this server (workspace admins may list them)."""

    async def body(client: Client, cfg: Settings) -> int:
        page = await _json(client, "GET", "/v1/users")
        if json_out:
            write_line(json.dumps(page, sort_keys=True))
            return 0
        for u in page["items"]:
            state = " (disabled)" if u["disabled"] else ""
            cfg.stdout.print(SafeText(f"{u['principal_id']}  {u['name']}{state}"))
        return 0

    execute(ctx, body)


# -- memberships -----------------------------------------------------------------------------


@member_app.command("add")
def member_add(
    ctx: typer.Context,
    workspace_id: Annotated[str, typer.Argument(metavar="WORKSPACE")],
    principal_id: Annotated[str, typer.Argument(metavar="PRINCIPAL")],
    role: Role = "member",
    json_out: JsonFlag = False,
) -> None:
    """Give a principal a role in a workspace (or change it)."""
    _check_role(settings(ctx), role)

    async def body(client: Client, cfg: Settings) -> int:
        m = await _json(
            client,
            "PUT",
            f"/v1/workspaces/{workspace_id}/members/{principal_id}",
            json={"role": role},
        )
        _print(cfg, json_out, m, f"{m['principal_id']} is {m['role']} in {m['workspace_id']}")
        return 0

    execute(ctx, body)


@member_app.command("remove")
def member_remove(
    ctx: typer.Context,
    workspace_id: Annotated[str, typer.Argument(metavar="WORKSPACE")],
    principal_id: Annotated[str, typer.Argument(metavar="PRINCIPAL")],
) -> None:
    """Remove a principal from a workspace: their running executions there end `revoked`."""

    async def body(client: Client, cfg: Settings) -> int:
        await client.request("DELETE", f"/v1/workspaces/{workspace_id}/members/{principal_id}")
        cfg.stdout.print(SafeText(f"{principal_id} removed from {workspace_id}"))
        return 0

    execute(ctx, body)


@member_app.command("list")
def member_list(
    ctx: typer.Context,
    workspace_id: Annotated[str, typer.Argument(metavar="WORKSPACE")],
    json_out: JsonFlag = False,
) -> None:
    """The members of a workspace and their roles."""

    async def body(client: Client, cfg: Settings) -> int:
        page = await _json(client, "GET", f"/v1/workspaces/{workspace_id}/members")
        if json_out:
            write_line(json.dumps(page, sort_keys=True))
            return 0
        for m in page["items"]:
            cfg.stdout.print(SafeText(f"{m['principal_id']}  {m['role']}"))
        return 0

    execute(ctx, body)


# -- agent principals ------------------------------------------------------------------------


@agent_app.command("create")
def agent_create(
    ctx: typer.Context,
    workspace_id: Annotated[str, typer.Argument(metavar="WORKSPACE")],
    name: str,
    role: Role = "member",
    json_out: JsonFlag = False,
) -> None:
    """Create an agent principal with its own role here; it inherits nothing from you."""
    _check_role(settings(ctx), role)

    async def body(client: Client, cfg: Settings) -> int:
        a = await _json(
            client,
            "POST",
            f"/v1/workspaces/{workspace_id}/agent-principals",
            json={"name": name, "role": role},
        )
        _print(cfg, json_out, a, f"{a['principal_id']} {a['name']} ({role} in {workspace_id})")
        return 0

    execute(ctx, body)


@agent_app.command("disable")
def agent_disable(
    ctx: typer.Context,
    principal_id: Annotated[str, typer.Argument(metavar="PRINCIPAL")],
    json_out: JsonFlag = False,
) -> None:
    """Disable an agent principal: its tokens stop working, its executions end `revoked`."""

    async def body(client: Client, cfg: Settings) -> int:
        a = await _json(client, "POST", f"/v1/agent-principals/{principal_id}/disable")
        _print(cfg, json_out, a, f"{a['principal_id']} disabled")
        return 0

    execute(ctx, body)


# -- tokens ----------------------------------------------------------------------------------


@token_app.command("create")
def token_create(
    ctx: typer.Context,
    principal: Annotated[
        str | None, typer.Option("--principal", help="An agent principal you administer.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="What it is for.")] = None,
    expires_in: Annotated[
        int | None, typer.Option("--expires-in", help="Seconds until it expires.", min=60)
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Create a token (yours, or an agent principal's) and print it once."""

    async def body(client: Client, cfg: Settings) -> int:
        t = await _json(
            client,
            "POST",
            "/v1/tokens",
            json={"principal_id": principal, "name": name, "expires_in": expires_in},
        )
        if json_out:
            write_line(json.dumps(t, sort_keys=True))
        else:
            cfg.stdout.print(SafeText(f"{t['token_id']} for {t['principal_id']}"))
            cfg.stdout.print(SafeText(f"token (shown once): {t['token']}"))
        return 0

    execute(ctx, body)


@token_app.command("list")
def token_list(
    ctx: typer.Context,
    principal: Annotated[
        str | None, typer.Option("--principal", help="An agent principal you administer.")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Tokens (ids, never secrets): yours, or an agent principal's."""

    async def body(client: Client, cfg: Settings) -> int:
        params = {"principal_id": principal} if principal else None
        page = await _json(client, "GET", "/v1/tokens", params=params)
        if json_out:
            write_line(json.dumps(page, sort_keys=True))
            return 0
        for t in page["items"]:
            state = "revoked" if t["revoked_at"] else f"expires {t['expires_at'] or 'never'}"
            cfg.stdout.print(SafeText(f"{t['token_id']}  {t['name'] or ''}  {state}"))
        return 0

    execute(ctx, body)


@token_app.command("revoke")
def token_revoke(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(metavar="TOKEN_ID")],
    json_out: JsonFlag = False,
) -> None:
    """Revoke a token at once; executions started with it end `revoked`."""

    async def body(client: Client, cfg: Settings) -> int:
        t = await _json(client, "DELETE", f"/v1/tokens/{token_id}")
        _print(cfg, json_out, t, f"{t['token_id']} revoked")
        return 0

    execute(ctx, body)
