"""Plugins and deployments: `nua plugin init|validate|publish|versions|show|release|rollback`,
`nua deploy`, `nua deployments`, `nua deployment show` (docs/plugins.md, docs/cli.md).

A plugin directory is read with the plugin format's `read_plugin`, here and again by the
server at publish, so a directory that passes `validate` publishes.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from opennua.client import Client
from opennua.client.responses import DeploymentDoc
from opennua.plugins import Plugin, PluginError, read_plugin, scaffold_plugin

from ._context import ExitCode, Settings, execute, fail, settings, write_line
from ._marketplace import publish_marketplace
from ._plugin_output import print_contents, problems_doc, short, summary

plugin_app = typer.Typer(no_args_is_help=True, help="Publish and release plugins.")
deployment_app = typer.Typer(no_args_is_help=True, help="Inspect deployments.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Dir = Annotated[Path, typer.Argument(metavar="DIR", help="A plugin directory.")]
Workspace = Annotated[
    str | None, typer.Option("--workspace", "-w", help="Where (default: your first workspace).")
]
Channel = Annotated[str, typer.Option("--channel", "-c", help="The release channel.")]


def _read(
    cfg: Settings, root: Path, *, version: str | None = None, json_out: bool = False
) -> tuple[Plugin, dict[str, tuple[bytes, bool]]]:
    """The plugin at ``root`` as the server will check it, and its files' bytes. Invalid:
    every problem, one per line, then exit 7."""
    try:
        plugin = read_plugin(root, version=version)
    except PluginError as exc:
        if json_out:
            write_line(json.dumps({"valid": False, "problems": problems_doc(exc.problems)}))
            raise typer.Exit(ExitCode.REJECTED) from None
        for problem in exc.problems:
            cfg.stderr.print(str(problem), soft_wrap=True)
        raise fail(cfg, f"invalid plugin: {summary(exc.problems)}", ExitCode.REJECTED) from None
    files = {f.path: ((root / f.path).read_bytes(), f.executable) for f in plugin.files}
    return plugin, files


@plugin_app.command("init")
def init(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The plugin's name (lowercase, digits, -._).")],
    into: Annotated[
        Path | None, typer.Option("--dir", help="Where to create it (default: ./NAME).")
    ] = None,
) -> None:
    """Create a working plugin: instructions, one skill, one sub-agent, one MCP server."""
    cfg = settings(ctx)
    target = into or Path(name)
    try:
        scaffold_plugin(target, name)
    except PluginError as exc:
        raise fail(cfg, str(exc)) from None
    cfg.stdout.print(
        f"created {target}: nua plugin validate {target} && nua plugin publish {target}"
    )


@plugin_app.command("validate")
def validate(ctx: typer.Context, root: Dir, json_out: JsonFlag = False) -> None:
    """Check a plugin directory as publishing would, without publishing: every problem,
    each with its severity and location."""
    cfg = settings(ctx)
    plugin, _ = _read(cfg, root, json_out=json_out)
    size = sum(f.size for f in plugin.files)
    problems, servers = problems_doc(plugin.problems), plugin.connections()
    if json_out:
        doc = {"valid": True, "name": plugin.name, "version": plugin.version}
        extra = {"digest": plugin.digest, "files": len(plugin.files), "size": size}
        write_line(json.dumps({**doc, **extra, "problems": problems, "servers": servers}))
        return
    cfg.stdout.print(
        f"{plugin.name}@{plugin.version}: ok ({len(plugin.files)} files, {size} bytes) "
        f"{short(plugin.digest)}"
    )
    print_contents(cfg, problems, servers)
    if problems:
        cfg.stdout.print(summary(plugin.problems))


Version = Annotated[
    str | None,
    typer.Option(
        "--version",
        help="The version to publish a plugin whose manifest has none as (default: "
        "0.0.0+ and the first 12 hex digits of its digest).",
    ),
]


@plugin_app.command("publish")
def publish(
    ctx: typer.Context,
    root: Annotated[
        Path | None, typer.Argument(metavar="[DIR]", help="A plugin directory.")
    ] = None,
    marketplace: Annotated[
        Path | None,
        typer.Option(
            "--marketplace",
            help="Publish every plugin DIR/.claude-plugin/marketplace.json lists (a local "
            "source; remote ones are skipped).",
        ),
    ] = None,
    version: Version = None,
    private: Annotated[
        bool, typer.Option("--private", help="Only you see it (default: the workspace).")
    ] = False,
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """Publish a plugin directory as an immutable version (again: idempotent)."""
    cfg = settings(ctx)
    visibility = "private" if private else "workspace"
    if (root is None) == (marketplace is None):
        raise fail(cfg, "give a plugin DIR or --marketplace DIR")
    if marketplace is not None:
        if version is not None:
            raise fail(cfg, "--version names one plugin's version; not with --marketplace")
        publish_marketplace(ctx, marketplace, visibility, workspace, json_out)
        return
    assert root is not None
    plugin, files = _read(cfg, root, version=version, json_out=json_out)

    async def body(client: Client, cfg: Settings) -> int:
        published = await client.publish_plugin(
            files,
            visibility=visibility,
            workspace_id=workspace,
            name=None if plugin.manifest else plugin.name,
            version=version,
        )
        if json_out:
            write_line(json.dumps(published, sort_keys=True))
            return 0
        what = "published" if published["created"] else "already published"
        ref = f"{published['name']}@{published['version']}"
        cfg.stdout.print(f"{what} {ref} {short(published['digest'])}")
        print_contents(cfg, published.get("problems", []), published.get("servers", []))
        return 0

    execute(ctx, body)


@plugin_app.command("versions")
def versions(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A plugin name.")],
    json_out: JsonFlag = False,
) -> None:
    """A plugin's versions, its channels and the history of every channel move."""

    async def body(client: Client, cfg: Settings) -> int:
        found = await client.plugin(name)
        if json_out:
            write_line(json.dumps(found, sort_keys=True))
            return 0
        by_version: dict[str, list[str]] = {}
        for channel, version in found["channels"].items():
            by_version.setdefault(version, []).append(channel)
        table = Table("version", "digest", "published", "channels", box=None)
        for v in found["versions"]:
            channels = ", ".join(sorted(by_version.get(v["version"], [])))
            table.add_row(v["version"], short(v["digest"]), v["published_at"], channels)
        cfg.stdout.print(table)
        if found["history"]:
            moves = Table("channel", "#", "move", "to", "at", box=None)
            for m in found["history"]:
                moves.add_row(m["channel"], str(m["seq"]), m["kind"], m["version"], m["moved_at"])
            cfg.stdout.print(moves)
        return 0

    execute(ctx, body)


@plugin_app.command("show")
def show(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="NAME[@VERSION]", help="A plugin (version).")],
    json_out: JsonFlag = False,
) -> None:
    """One version's files and digest (default: the newest version)."""
    name, _, version = ref.partition("@")

    async def body(client: Client, cfg: Settings) -> int:
        wanted = version or (await client.plugin(name))["versions"][-1]["version"]
        found = await client.plugin_version(name, wanted)
        if json_out:
            write_line(json.dumps(found, sort_keys=True))
            return 0
        cfg.stdout.print(
            f"{found['name']}@{found['version']} {found['digest']}\n{found['description']}"
        )
        print_contents(cfg, found.get("problems", []), found.get("servers", []))
        requested = found.get("egress_requested")
        if requested is not None:
            shown = ", ".join(requested) or "nothing"
            cfg.stdout.print(f"egress requested: {shown} (a deployment decides)")
        for c in found.get("commands") or []:
            hint = f" {c['argument_hint']}" if c["argument_hint"] else ""
            cfg.stdout.print(f"command /{c['name']}{hint}: {c['description']}", highlight=False)
        for h in found.get("hooks") or []:
            on = f" on {h['matcher']}" if h["matcher"] else ""
            cfg.stdout.print(f"hook {h['event']}{on}", highlight=False)
        table = Table("path", "size", "sha256", box=None)
        for f in found["files"]:
            table.add_row(
                f["path"] + ("*" if f["executable"] else ""), str(f["size"]), f["sha256"][:12]
            )
        cfg.stdout.print(table)
        return 0

    execute(ctx, body)


@plugin_app.command("release")
def release(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A plugin name.")],
    version: Annotated[str, typer.Argument(help="A published version.")],
    channel: Channel = "stable",
) -> None:
    """Point a channel at a version; sessions created from now on use it."""

    async def body(client: Client, cfg: Settings) -> int:
        moved = await client.release(name, channel, version)
        cfg.stdout.print(f"{name} {channel} -> {moved['version']} (move {moved['seq']})")
        return 0

    execute(ctx, body)


@plugin_app.command("rollback")
def rollback(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A plugin name.")],
    channel: Channel = "stable",
) -> None:
    """Move a channel back to its previous target; existing sessions are untouched."""

    async def body(client: Client, cfg: Settings) -> int:
        moved = await client.rollback(name, channel)
        cfg.stdout.print(f"{name} {channel} -> {moved['version']} (rollback, move {moved['seq']})")
        return 0

    execute(ctx, body)


def deploy(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The deployment's name.")],
    plugin: Annotated[str, typer.Option("--plugin", "-p", help="The plugin it runs.")],
    model: Annotated[str, typer.Option("--model", "-m", help="provider:model")],
    channel: Annotated[
        str | None, typer.Option("--channel", "-c", help="Follow a channel (default stable).")
    ] = None,
    version: Annotated[str | None, typer.Option("--version", help="Pin a version.")] = None,
    tool: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp-url",
            "--tool",
            help="SERVER=URL: reach one of the plugin's MCP servers or A2A agents there (a "
            'placeholder, `"url": ""`, needs one); SERVER=COMMAND [ARGS…]: start an MCP '
            "server with that command instead (one shell-quoted string). Repeatable.",
        ),
    ] = None,
    require_server: Annotated[
        list[str] | None,
        typer.Option(
            "--require-server",
            help="SERVER: fail the turn when this MCP server cannot start (by default the "
            "turn goes on without it, and says why). Repeatable.",
        ),
    ] = None,
    model_alias: Annotated[
        list[str] | None,
        typer.Option(
            "--model-alias",
            help="ALIAS=provider:model: what a sub-agent's `model: ALIAS` (opus, sonnet, "
            "haiku) runs. Repeatable; unmapped ones take the provider's default.",
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="NAME=VALUE: what ${NAME} in the plugin's .mcp.json names. Not for secrets "
            "(--credential, --sandbox-secret). Repeatable.",
        ),
    ] = None,
    credential: Annotated[
        list[str] | None,
        typer.Option(
            "--credential",
            help="SERVER=SECRET[:HEADER]: send that secret to that MCP server or A2A agent "
            "(default header Authorization, as `Bearer <value>`). A reference: no value here.",
        ),
    ] = None,
    sandbox_secret: Annotated[
        list[str] | None,
        typer.Option(
            "--sandbox-secret",
            help="SERVER:ENV=SECRET: put a secret into a stdio MCP server's environment in "
            "the sandbox. Outside the gateway's guarantee; needs --confirm-sandbox-exposure.",
        ),
    ] = None,
    confirm_sandbox: Annotated[
        bool,
        typer.Option(
            "--confirm-sandbox-exposure",
            help="Confirm that --sandbox-secret values are readable by code in the sandbox.",
        ),
    ] = False,
    deadline: Annotated[float | None, typer.Option(help="Seconds one execution may take.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Model calls per execution.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Tokens per execution.")] = None,
    max_cost: Annotated[float | None, typer.Option(help="USD per execution.")] = None,
    principal: Annotated[
        str | None,
        typer.Option(help="The execution principal of automated turns (default the owner)."),
    ] = None,
    run_as: Annotated[
        str,
        typer.Option(help="caller: a person's turns run as them; principal: as --principal."),
    ] = "caller",
    egress: Annotated[
        list[str] | None,
        typer.Option(
            "--egress",
            help="HOST:PORT sandboxed code may connect to through the egress proxy "
            "(a name, *.domain, an address or a CIDR network; a port or a range). "
            "Repeatable. None: no network at all. The plugin's own list is a request.",
        ),
    ] = None,
    workspace: Workspace = None,
    json_out: JsonFlag = False,
) -> None:
    """Save a deployment (validated now; a change is a new digest)."""
    cfg = settings(ctx)
    tools: dict[str, dict[str, Any]] = {}
    for item in tool or []:
        server, sep, target = item.partition("=")
        if not sep or not server or not target.strip():
            raise fail(cfg, f"--tool {item!r}: expected SERVER=URL or SERVER=COMMAND [ARGS…]")
        tools[server] = _tool_override(cfg, item, target)
    for server in require_server or []:
        tools.setdefault(server, {})["required"] = True
    aliases = _pairs(cfg, "--model-alias", "ALIAS=provider:model", model_alias)
    variables = _pairs(cfg, "--env", "NAME=VALUE", env, empty_value=True)
    refs = []
    for item in credential or []:
        server, sep, rest = item.partition("=")
        secret, _, header = rest.partition(":")
        if not sep or not server or not secret:
            raise fail(cfg, f"--credential {item!r}: expected SERVER=SECRET[:HEADER]")
        ref = {"server": server, "secret": secret}
        if header:
            # A header other than Authorization carries the bare value (an API key).
            ref |= {"header": header, "prefix": ""}
        refs.append(ref)
    sandbox_env = []
    for item in sandbox_secret or []:
        target, sep, secret = item.partition("=")
        server, colon, env_name = target.partition(":")
        if not sep or not colon or not server or not env_name or not secret:
            raise fail(cfg, f"--sandbox-secret {item!r}: expected SERVER:ENV=SECRET")
        sandbox_env.append({"server": server, "env": env_name, "secret": secret})
    limits = {
        "deadline_seconds": deadline,
        "max_steps": max_steps,
        "max_tokens": max_tokens,
        "max_cost_usd": max_cost,
    }
    spec: dict[str, Any] = {
        "plugin": plugin,
        "model": model,
        "tools": tools,
        "credentials": refs,
        "sandbox_env": sandbox_env,
        "sandbox_env_confirmed": confirm_sandbox,
        "limits": {k: v for k, v in limits.items() if v is not None},
        "egress": list(egress or []),
        "model_aliases": aliases,
        "env": variables,
    }
    if channel is not None:
        spec["channel"] = channel
    if version is not None:
        spec["version"] = version
    if principal is not None:
        spec["principal_id"] = principal
    if run_as not in ("caller", "principal"):
        raise fail(cfg, f"--run-as must be caller or principal, not {run_as!r}")
    spec["run_as"] = run_as

    async def body(client: Client, cfg: Settings) -> int:
        saved = await client.deploy(name, spec, workspace_id=workspace)
        if json_out:
            write_line(json.dumps(saved, sort_keys=True))
        else:
            cfg.stdout.print(f"deployed {name} {short(saved['digest'])}")
            cfg.stdout.print(f"egress       {_egress(saved)}")
            for line in _problems(saved):
                cfg.stdout.print(line)
        return 0

    execute(ctx, body)


def deployments(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List deployments."""

    async def body(client: Client, cfg: Settings) -> int:
        items = await client.deployments()
        if json_out:
            for item in items:
                write_line(json.dumps(item, sort_keys=True))
            return 0
        table = Table("deployment", "plugin", "model", "digest", "saved", box=None)
        for d in items:
            table.add_row(d["name"], _target(d["spec"]), d["spec"]["model"], short(d["digest"]),
                          d["created_at"])  # fmt: skip
        cfg.stdout.print(table)
        return 0

    execute(ctx, body)


@deployment_app.command("show")
def deployment_show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A deployment name.")],
    json_out: JsonFlag = False,
) -> None:
    """A deployment's configuration; credentials are shown by name only."""

    async def body(client: Client, cfg: Settings) -> int:
        found = await client.deployment(name)
        if json_out:
            write_line(json.dumps(found, sort_keys=True))
            return 0
        spec = found["spec"]
        lines = [
            f"{found['name']} {found['digest']}",
            f"plugin       {_target(spec)}",
            f"model        {spec['model']}",
            f"principal    {spec.get('principal_id', '')} "
            f"(a person's turns run as {'it' if spec.get('run_as') == 'principal' else 'them'})",
            f"tools        {_tools(spec.get('tools', {}))}",
            f"model alias  {_mapping(spec.get('model_aliases', {}))}",
            f"env          {_mapping(spec.get('env', {}))}",
            f"credentials  {_credentials(spec.get('credentials', []))}",
            f"sandbox env  {_sandbox_env(spec)}",
            f"limits       {_limits(spec.get('limits', {}))}",
            f"egress       {_egress(found)}",
            f"saved        {found['created_at']}",
            *_problems(found),
        ]
        cfg.stdout.print("\n".join(lines))
        return 0

    execute(ctx, body)


def _target(spec: dict[str, Any]) -> str:
    if "version" in spec:
        return f"{spec['plugin']}@{spec['version']}"
    return f"{spec['plugin']}:{spec.get('channel', 'stable')}"


def _limits(limits: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(limits.items())) or "-"


def _credentials(refs: list[dict[str, Any]]) -> str:
    """By reference only: which server gets which secret (by name) in which header."""
    shown = [
        f"{r['server']}: {r.get('header', 'Authorization')} <- secret {r['secret']}" for r in refs
    ]
    return "; ".join(shown) or "-"


def _egress(deployment: Mapping[str, Any]) -> str:
    """What sandboxed code may reach (the deployment decides), and what the plugin asks."""
    allowed = deployment["spec"].get("egress") or []
    shown = ", ".join(allowed) if allowed else "none (sandboxed code has no network)"
    requested = deployment.get("egress_requested")
    if requested is None:
        return shown
    return f"{shown}; the plugin requests: {', '.join(requested) or 'nothing'}"


def _sandbox_env(spec: dict[str, Any]) -> str:
    entries = spec.get("sandbox_env") or []
    if not entries:
        return "off"
    shown = "; ".join(f"{e['server']}: {e['env']} <- secret {e['secret']}" for e in entries)
    return f"ON (admin-confirmed; outside the gateway's guarantee) {shown}"


def _tool_override(cfg: Settings, item: str, target: str) -> dict[str, Any]:
    """`URL` reaches the server remotely; anything else is the command that starts it."""
    if re.match(r"https?://", target):
        return {"url": target}
    try:
        command, *args = shlex.split(target)
    except ValueError as exc:
        raise fail(cfg, f"--tool {item!r}: {exc}") from None
    return {"command": command, "args": args}


def _pairs(
    cfg: Settings, flag: str, form: str, items: list[str] | None, *, empty_value: bool = False
) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key or not (value or empty_value):
            raise fail(cfg, f"{flag} {item!r}: expected {form}")
        out[key] = value
    return out


def _tools(tools: dict[str, dict[str, Any]]) -> str:
    shown = []
    for server, override in sorted(tools.items()):
        where = override.get("url") or override.get("command") or "as the plugin says"
        shown.append(f"{server}: {where}{' (required)' if override.get('required') else ''}")
    return "; ".join(shown) or "-"


def _mapping(values: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "-"


def _problems(deployment: DeploymentDoc) -> list[str]:
    """What the deployment leaves its plugin without (servers to configure, aliases)."""
    return [
        f"{p['severity']}: {p['message']}" + (f" ({p['file']})" if p.get("file") else "")
        for p in deployment.get("problems") or []
    ]
