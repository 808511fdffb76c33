"""Who is who: `nua login`, `nua whoami`, `nua workspace`, `nua user`, `nua member`,
`nua agent-principal`, `nua token`, `nua admin`. Thin over the HTTP API: the server
decides who may do what (a refusal is exit 8); `--json` prints the API's answer as is.

A token the server returns (a new user's, `token create`) is printed once, to stdout,
and never stored by the CLI except by `nua login`, in the 0600 credentials file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, cast

import typer

from opennua.client import Client, connect
from opennua.client.responses import PrincipalDoc

from ._context import Settings, emit, execute, fail, settings, write_line
from ._credentials import save_credentials
from ._safe import SafeText

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Role = Annotated[
    str, typer.Option("--role", help="owner, admin, member or viewer.", show_default=True)
]
_ROLES = ("owner", "admin", "member", "viewer")
RoleName = Literal["owner", "admin", "member", "viewer"]

workspace_app = typer.Typer(help="Workspaces: create and list.", no_args_is_help=True)
user_app = typer.Typer(help="Users (people): add, list, disable.", no_args_is_help=True)
member_app = typer.Typer(
    help="Memberships: a principal's role in a workspace.", no_args_is_help=True
)
agent_app = typer.Typer(help="Agent principals: identities of their own.", no_args_is_help=True)
token_app = typer.Typer(help="API tokens: create, list, revoke.", no_args_is_help=True)
admin_app = typer.Typer(
    help="Server admins: who manages people on this server.", no_args_is_help=True
)
Workspace = Annotated[
    str | None,
    typer.Option("--workspace", "-w", help="A workspace you administer: its members' tokens."),
]


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
            me = await client.whoami()
        path = save_credentials(url, secret)
        cfg.stdout.print(
            f"logged in to {url} as {me['name']} ({me['principal_id']}); saved in {path}"
        )
        return 0

    execute(ctx, body)


def whoami(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """Who the token in use stands for, and their role in each workspace."""

    async def body(client: Client, cfg: Settings) -> int:
        me = await client.whoami()
        if json_out:
            write_line(json.dumps(me, sort_keys=True))
            return 0
        admin = ", server admin" if me.get("server_admin") else ""
        cfg.stdout.print(
            f"{me['name']} ({me['kind']} {me['principal_id']}, token {me['token_id']}{admin})"
        )
        for w in me["workspaces"]:
            cfg.stdout.print(f"  {w['role']:<7} {w['name']} ({w['workspace_id']})")
        return 0

    execute(ctx, body)


# -- helpers ---------------------------------------------------------------------------------


def _check_role(config: Settings, role: str) -> None:
    if role not in _ROLES:
        raise fail(config, f"--role must be one of {', '.join(_ROLES)}")


# -- workspaces ------------------------------------------------------------------------------


@workspace_app.command("create")
def workspace_create(ctx: typer.Context, name: str, json_out: JsonFlag = False) -> None:
    """Create a workspace; you are its owner."""

    async def body(client: Client, cfg: Settings) -> int:
        w = await client.create_workspace(name)
        emit(cfg, json_out, w, f"{w['workspace_id']} {w['name']} (owner)")
        return 0

    execute(ctx, body)


@workspace_app.command("list")
def workspace_list(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """The workspaces you are a member of, with your role."""

    async def body(client: Client, cfg: Settings) -> int:
        workspaces = await client.workspaces()
        if json_out:
            write_line(json.dumps({"items": workspaces}, sort_keys=True))
            return 0
        for w in workspaces:
            cfg.stdout.print(SafeText(f"{w['workspace_id']}  {w['role']:<7} {w['name']}"))
        return 0

    execute(ctx, body)


# -- users -----------------------------------------------------------------------------------


@user_app.command("add")
def user_add(ctx: typer.Context, name: str, json_out: JsonFlag = False) -> None:
    """Add a person (server admins may) and print their first token, once: hand it to
    them. They see nothing until `nua member add` gives them a role."""

    async def body(client: Client, cfg: Settings) -> int:
        u = await client.add_user(name)
        if json_out:
            write_line(json.dumps(u, sort_keys=True))
        else:
            cfg.stdout.print(SafeText(f"{u['principal_id']} {u['name']}"))
            cfg.stdout.print(SafeText(f"token (shown once): {u['token']}"))
        return 0

    execute(ctx, body)


@user_app.command("list")
def user_list(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """The users you manage: every one (server admins); the members of the workspaces
    you administer and the users you added (workspace admins)."""

    async def body(client: Client, cfg: Settings) -> int:
        _principals(cfg, json_out, await client.users())
        return 0

    execute(ctx, body)


@user_app.command("disable")
def user_disable(
    ctx: typer.Context,
    principal_id: Annotated[str, typer.Argument(metavar="PRINCIPAL")],
    json_out: JsonFlag = False,
) -> None:
    """Cut a person off everywhere (server admins): every token of theirs is refused,
    their open streams close and their executions end `revoked`, within a second."""

    async def body(client: Client, cfg: Settings) -> int:
        u = await client.disable_user(principal_id)
        emit(cfg, json_out, u, f"{u['principal_id']} {u['name']} disabled")
        return 0

    execute(ctx, body)


def _principals(cfg: Settings, json_out: bool, principals: list[PrincipalDoc]) -> None:
    if json_out:
        write_line(json.dumps({"items": principals}, sort_keys=True))
        return
    for p in principals:
        notes = [
            note
            for note, on in (
                (p["kind"], p["kind"] != "user"),
                ("server admin", p.get("server_admin")),
                ("disabled", p["disabled"]),
            )
            if on
        ]
        state = f" ({', '.join(notes)})" if notes else ""
        cfg.stdout.print(SafeText(f"{p['principal_id']}  {p['name']}{state}"))


# -- server admins ---------------------------------------------------------------------------


@admin_app.command("grant")
def admin_grant(
    ctx: typer.Context,
    principal_id: Annotated[str, typer.Argument(metavar="PRINCIPAL")],
    json_out: JsonFlag = False,
) -> None:
    """Make a user a server admin (server admins may)."""

    async def body(client: Client, cfg: Settings) -> int:
        u = await client.grant_admin(principal_id)
        emit(cfg, json_out, u, f"{u['principal_id']} {u['name']} is a server admin")
        return 0

    execute(ctx, body)


@admin_app.command("revoke")
def admin_revoke(
    ctx: typer.Context,
    principal_id: Annotated[str, typer.Argument(metavar="PRINCIPAL")],
    json_out: JsonFlag = False,
) -> None:
    """A server admin no longer (the last one stays: exit 4)."""

    async def body(client: Client, cfg: Settings) -> int:
        u = await client.revoke_admin(principal_id)
        emit(cfg, json_out, u, f"{u['principal_id']} {u['name']} is no longer a server admin")
        return 0

    execute(ctx, body)


@admin_app.command("principals")
def admin_principals(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option("--kind", help="user or agent.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Every principal of the server, people and agent principals (server admins)."""
    if kind not in (None, "user", "agent"):
        raise fail(settings(ctx), "--kind must be user or agent")
    kind_ = cast(Literal["user", "agent"] | None, kind)

    async def body(client: Client, cfg: Settings) -> int:
        _principals(cfg, json_out, await client.principals(kind_))
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
        m = await client.set_member(workspace_id, principal_id, cast(RoleName, role))
        emit(cfg, json_out, m, f"{m['principal_id']} is {m['role']} in {m['workspace_id']}")
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
        await client.remove_member(workspace_id, principal_id)
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
        members = await client.members(workspace_id)
        if json_out:
            write_line(json.dumps({"items": members}, sort_keys=True))
            return 0
        for m in members:
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
        a = await client.create_agent_principal(workspace_id, name, cast(RoleName, role))
        emit(cfg, json_out, a, f"{a['principal_id']} {a['name']} ({role} in {workspace_id})")
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
        a = await client.disable_agent_principal(principal_id)
        emit(cfg, json_out, a, f"{a['principal_id']} disabled")
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
        t = await client.create_token(principal_id=principal, name=name, expires_in=expires_in)
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
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """Tokens (ids, never secrets): yours, an agent principal's, or (--workspace) those of
    a workspace's members."""
    if principal and workspace:
        raise fail(settings(ctx), "give --principal or --workspace, not both")

    async def body(client: Client, cfg: Settings) -> int:
        tokens: Sequence[Mapping[str, Any]] = (
            await client.member_tokens(workspace) if workspace else await client.tokens(principal)
        )
        if json_out:
            write_line(json.dumps({"items": tokens}, sort_keys=True))
            return 0
        for t in tokens:
            state = "revoked" if t["revoked_at"] else f"expires {t['expires_at'] or 'never'}"
            if t.get("revoked_here_at"):
                state = "revoked here"
            who = f"  {t['principal_id']}" if workspace else ""
            cfg.stdout.print(SafeText(f"{t['token_id']}{who}  {t['name'] or ''}  {state}"))
        return 0

    execute(ctx, body)


@token_app.command("revoke")
def token_revoke(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(metavar="TOKEN_ID")],
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """Revoke a token at once: yours, an agent principal's you administer, anybody's
    (server admins), or with --workspace a member's for that workspace's work only.
    Within a second its open streams close and what it started ends `revoked`."""

    async def body(client: Client, cfg: Settings) -> int:
        if workspace:
            revoked = await client.revoke_member_token(workspace, token_id)
            emit(cfg, json_out, revoked, f"{revoked['token_id']} revoked in {workspace}")
            return 0
        t = await client.revoke_token(token_id)
        emit(cfg, json_out, t, f"{t['token_id']} revoked")
        return 0

    execute(ctx, body)
