"""`nua plugin publish --marketplace DIR`: every plugin a Claude Code marketplace lists,
published one after the other, one line each and the totals (docs/cli.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from opennua.client import ApiError, Client, UnauthorizedError
from opennua.plugins import (
    MANIFEST,
    MarketplaceEntry,
    PluginError,
    read_marketplace,
    read_plugin,
)

from ._context import ExitCode, Settings, execute, fail, settings, write_line
from ._plugin_output import short, summary


def publish_marketplace(
    ctx: typer.Context, root: Path, visibility: str, workspace: str | None, json_out: bool
) -> None:
    """Exit 0 when every local plugin published (or already was); 7 when one failed (its
    line says why). Remote sources are skipped, not failures: nothing is fetched."""
    cfg = settings(ctx)
    try:
        entries = read_marketplace(root)
    except PluginError as exc:
        raise fail(cfg, f"invalid marketplace: {exc}", ExitCode.REJECTED) from None

    async def body(client: Client, cfg: Settings) -> int:
        outcomes = [await _publish(client, entry, visibility, workspace) for entry in entries]
        for outcome in outcomes:
            if json_out:
                write_line(json.dumps(outcome, sort_keys=True))
            else:
                cfg.stdout.print(_line(outcome), soft_wrap=True)
        counts = {k: sum(o["outcome"] == k for o in outcomes) for k in _OUTCOMES}
        if not json_out:
            cfg.stdout.print(", ".join(f"{n} {k}" for k, n in counts.items()))
        return ExitCode.REJECTED if counts["failed"] else 0

    execute(ctx, body)


_OUTCOMES = ("published", "already published", "skipped", "failed")


async def _publish(
    client: Client, entry: MarketplaceEntry, visibility: str, workspace: str | None
) -> dict[str, Any]:
    out: dict[str, Any] = {"plugin": entry.name}
    if entry.path is None:
        return out | {"outcome": "skipped", "reason": entry.skipped}
    has_manifest = (entry.path / MANIFEST).is_file()
    name = None if has_manifest else entry.name
    version = None
    try:
        plugin = read_plugin(entry.path, name=name)
        if entry.version is not None and "version" not in plugin.manifest:
            # The entry's version stands in for a manifest that has none (Claude Code's
            # `strict: false` entries carry the plugin's metadata).
            version = entry.version
            plugin = read_plugin(entry.path, name=name, version=version)
    except PluginError as exc:
        errors = [p for p in exc.problems if p.severity == "error"]
        first = (errors or list(exc.problems))[0]
        return out | {"outcome": "failed", "reason": f"{first} ({summary(exc.problems)})"}
    files = {f.path: ((entry.path / f.path).read_bytes(), f.executable) for f in plugin.files}
    try:
        published = await client.publish_plugin(
            files,
            visibility=visibility,
            workspace_id=workspace,
            name=name,
            version=version,
        )
    except UnauthorizedError:
        raise  # every other entry would fail the same way: say it once
    except ApiError as exc:
        return out | {"outcome": "failed", "reason": f"{exc.code}: {exc.detail}"}
    return out | {
        "outcome": "published" if published["created"] else "already published",
        "version": published["version"],
        "digest": published["digest"],
        "problems": published.get("problems", []),
    }


def _line(outcome: dict[str, Any]) -> str:
    name, what = outcome["plugin"], outcome["outcome"]
    if what in ("skipped", "failed"):
        return f"{what} {name}: {outcome['reason']}"
    found = outcome["problems"]
    counts = f" ({summary(found)})" if found else ""
    return f"{what} {name}@{outcome['version']} {short(outcome['digest'])}{counts}"
