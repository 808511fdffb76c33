"""A Claude Code marketplace: `.claude-plugin/marketplace.json`, the list of plugins a
repository publishes (`nua plugin publish --marketplace DIR`, docs/plugins.md).

An entry whose `source` is a path in the repository is a plugin directory here; one whose
source is elsewhere (a git URL, a GitHub repository) is listed as skipped, never fetched:
publishing reads only what is on this machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from opennua.plugins._errors import PluginError

MARKETPLACE = ".claude-plugin/marketplace.json"


@dataclass(frozen=True)
class MarketplaceEntry:
    """One listed plugin: its directory (`path`), or why it is not published (`skipped`).
    `version` is the entry's, for a plugin whose own manifest does not say one."""

    name: str
    path: Path | None = None
    version: str | None = None
    skipped: str | None = None


def read_marketplace(root: Path | str) -> tuple[MarketplaceEntry, ...]:
    """The plugins `root`'s marketplace lists, in its order. A malformed file, or a local
    source that leaves `root`, is a `PluginError`."""
    root = Path(root).resolve()
    path = root / MARKETPLACE
    if not path.is_file():
        raise PluginError(f"no marketplace in {root}", file=MARKETPLACE)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise PluginError(f"malformed JSON: {exc}", file=MARKETPLACE, line=line) from None
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if not isinstance(plugins, list):
        raise PluginError('expected {"plugins": [...]}', file=MARKETPLACE, line=1)
    metadata = data.get("metadata")
    base = metadata.get("pluginRoot", ".") if isinstance(metadata, dict) else "."
    entries = []
    for index, entry in enumerate(plugins):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugins[{index}] has no name", file=MARKETPLACE)
        version = entry.get("version")
        entries.append(
            _entry(root, str(base), name, entry.get("source"), version)
            if version is None or isinstance(version, str)
            else MarketplaceEntry(name, skipped=f"version {version!r} is not text")
        )
    return tuple(entries)


def _entry(
    root: Path, base: str, name: str, source: object, version: str | None
) -> MarketplaceEntry:
    if isinstance(source, dict):
        kind = source.get("source", "remote")
        where = source.get("url") or source.get("repo") or ""
        return MarketplaceEntry(
            name,
            skipped=f"{kind} source {where} is not fetched; clone it and publish the directory",
        )
    if not isinstance(source, str) or not source:
        return MarketplaceEntry(name, skipped=f"source {source!r} is not a path")
    # "./plugins/x" is from the marketplace's root; a bare "x" from its `pluginRoot`.
    rel = source if source.startswith(("./", "../", "/")) else f"{base}/{source}"
    directory = (root / rel).resolve()
    if not directory.is_relative_to(root):
        raise PluginError(
            f"plugin {name!r}: source {source!r} leaves the marketplace", file=MARKETPLACE
        )
    if not directory.is_dir():
        return MarketplaceEntry(name, skipped=f"source {source} is not a directory here")
    return MarketplaceEntry(name, path=directory, version=version)
