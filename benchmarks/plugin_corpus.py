"""How many real plugins read and publish unchanged (issue 30).

    python benchmarks/plugin_corpus.py ../shared/plugin-corpus

Finds every plugin under the corpus directory: those its marketplaces
(`.claude-plugin/marketplace.json`) list with a local source, every other directory with a
`.claude-plugin/plugin.json`, and bare Agent Skills (a folder with a `SKILL.md` outside any
plugin), each wrapped as a user would: a directory of that name holding `skills/<name>/`,
no manifest. Marketplace entries whose source is remote are counted as skipped (nothing is
fetched).

Each plugin is validated (`read_plugin`, what `nua plugin validate` runs) and published
over HTTP to an in-process server on SQLite, as `nua plugin publish DIR` does (the server
reads it again). Printed per plugin: validate, publish, errors, warnings and the features
it ignores; then the totals. Goal: every plugin of the corpus publishes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import TOKEN, free_port, serving

from opennua.client import ApiError, Client
from opennua.plugins import (
    MANIFEST,
    MARKETPLACE,
    Plugin,
    PluginError,
    Problem,
    read_marketplace,
    read_plugin,
)
from opennua.store import open_store


@dataclass
class Found:
    """One plugin of the corpus: where it is, and what publishing it needs to be told."""

    label: str  # where in the corpus (relative)
    path: Path
    name: str | None = None  # no manifest: the name (the directory's, or the entry's)
    version: str | None = None  # a marketplace entry's, for a manifest without one


@dataclass
class Row:
    label: str
    validated: bool = False
    published: str = "-"  # ok, fail (with why), or - (not attempted)
    problems: list[Problem] = field(default_factory=list)


def discover(corpus: Path, staging: Path) -> tuple[list[Found], list[str]]:
    """(the corpus's plugins, the remote marketplace entries skipped)."""
    corpus = corpus.resolve()
    found: dict[Path, Found] = {}
    skipped: list[str] = []
    for listing in sorted(corpus.rglob(MARKETPLACE)):
        market = listing.parent.parent
        for entry in read_marketplace(market):
            if entry.path is None:
                skipped.append(f"{entry.name}: {entry.skipped}")
                continue
            has_manifest = (entry.path / MANIFEST).is_file()
            found.setdefault(
                entry.path,
                Found(
                    _rel(corpus, entry.path),
                    entry.path,
                    name=None if has_manifest else entry.name,
                    version=entry.version,
                ),
            )
    for manifest in sorted(corpus.rglob(MANIFEST)):
        root = manifest.parent.parent
        found.setdefault(root, Found(_rel(corpus, root), root))
    plugins = list(found.values())
    for skill in sorted(corpus.rglob("SKILL.md")):
        folder = skill.parent
        inside = any(folder.is_relative_to(p.path) for p in plugins)
        nested = any(folder != s.parent and folder.is_relative_to(s.parent) for s in
                     corpus.rglob("SKILL.md"))  # fmt: skip
        if inside or nested:
            continue  # a plugin's skill, or a resource of a skill
        wrapped = staging / folder.name
        shutil.copytree(folder, wrapped / "skills" / folder.name)
        plugins.append(Found(_rel(corpus, folder) + " (bare skill)", wrapped, name=folder.name))
    return plugins, skipped


def _rel(corpus: Path, path: Path) -> str:
    return path.relative_to(corpus).as_posix() or "."


def validate(found: Found) -> tuple[Plugin | None, Row]:
    row = Row(found.label)
    try:
        plugin = read_plugin(found.path, name=found.name)
        if found.version is not None and "version" not in plugin.manifest:
            plugin = read_plugin(found.path, name=found.name, version=found.version)
    except PluginError as exc:
        row.problems = list(exc.problems)
        return None, row
    row.validated, row.problems = True, list(plugin.problems)
    return plugin, row


async def publish(client: Client, found: Found, plugin: Plugin, row: Row) -> None:
    files = {f.path: ((found.path / f.path).read_bytes(), f.executable) for f in plugin.files}
    version = None if "version" in plugin.manifest else found.version
    try:
        await client.publish_plugin(files, name=found.name, version=version)
        row.published = "ok"
    except ApiError as exc:
        row.published = f"fail ({exc.code}: {exc.detail})"


def ignored_features(problems: list[Problem]) -> list[str]:
    """What a plugin has that opennua does not run: a folder, or a key by its name."""
    out = []
    for p in problems:
        if p.severity == "ignored":
            key = re.search(r"key '([^']+)'", p.message)
            out.append(key[1] if key else p.where)
    return sorted(set(out))


def report(rows: list[Row], skipped: list[str]) -> None:
    width = max(len(r.label) for r in rows)
    for r in rows:
        counts = Counter(p.severity for p in r.problems)
        validated = "ok" if r.validated else "fail"
        print(
            f"{r.label:<{width}}  validate {validated:<4}  publish {r.published:<4}  "
            f"errors {counts['error']:>2}  warnings {counts['warning']:>2}  "
            f"ignored: {', '.join(ignored_features(r.problems)) or '-'}"
        )
        for p in r.problems:
            if p.severity == "error":
                print(f"    {p}")
    if skipped:
        names = ", ".join(entry.partition(":")[0] for entry in skipped)
        print(f"remote marketplace entries, not fetched: {names}")
    counts = Counter(p.severity for r in rows for p in r.problems)
    total = len(rows)
    print(
        f"plugins: {total}; validate ok: {sum(r.validated for r in rows)} of {total}; "
        f"publish ok: {sum(r.published == 'ok' for r in rows)} of {total}; "
        f"errors {counts['error']}, warnings {counts['warning']}, ignored {counts['ignored']}; "
        f"remote entries skipped: {len(skipped)}"
    )


async def main(corpus: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        plugins, skipped = discover(corpus, data / "wrapped")
        store = await open_store(f"sqlite:///{data}/nua.db", data_dir=data / "blobs")
        rows = []
        async with store:
            port = free_port()
            async with (
                serving(store, port) as running,
                Client(running.url, token=TOKEN) as client,
            ):
                for found in plugins:
                    plugin, row = validate(found)
                    if plugin is not None:
                        await publish(client, found, plugin, row)
                    rows.append(row)
        report(rows, skipped)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="a directory of plugins (and marketplaces)")
    args = parser.parse_args()
    os.environ.setdefault("NUA_MODEL", "scripted:demo")
    asyncio.run(main(args.corpus))
