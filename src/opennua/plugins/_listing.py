"""The files of a plugin directory and its digest: what is published, byte for byte.

The listing is canonical (sorted relative POSIX paths, the executable bit, the sha256 of
each file), so the digest does not depend on the machine, the file system or mtimes.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from opennua.plugins._errors import PluginError, Problem

#: Documented in docs/plugins.md ("Limits"). A plugin is an agent's definition and the code
#: of its MCP servers, not a data set: large inputs belong in artifacts or the workspace.
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_TOTAL_BYTES = 200 * 1024 * 1024
MAX_FILES = 10_000
#: Never part of a plugin: version control and byte-code caches.
SKIPPED_DIRS = frozenset({".git", "__pycache__"})


def never_published(path: str) -> bool:
    """Whether a plugin path is one a plugin never holds: version control and byte code.
    What the digest covers is what runs, so a reviewer reads the source that runs, never a
    `.pyc` smuggled beside it."""
    parts = path.split("/")
    return any(p in SKIPPED_DIRS for p in parts) or parts[-1].endswith(".pyc")


@dataclass(frozen=True, kw_only=True)
class PluginFile:
    """One file of a plugin directory; built by keyword, like the store's `PluginFile` (the
    published row) that the registry copies it into."""

    path: str  # relative, POSIX separators
    sha256: str  # hex
    size: int
    executable: bool


def list_files(root: Path) -> tuple[PluginFile, ...]:
    """Every file under `root`, sorted by path. A symlink is followed only to a file inside
    `root` (it is published as that file's bytes)."""
    root = root.resolve()
    if not root.is_dir():
        raise PluginError(f"{root} is not a directory")
    files: list[PluginFile] = []
    # Every unreadable file is reported at once; the limits on the whole stop the walk.
    problems: list[Problem] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if name in SKIPPED_DIRS:
                dirnames.remove(name)
            elif (here / name).is_symlink():
                dirnames.remove(name)
                try:
                    _check_link(root, here / name)
                    raise PluginError(
                        "a symlink to a directory is not supported; copy the directory",
                        file=_rel(root, here / name),
                    )
                except PluginError as exc:
                    problems.extend(exc.problems)
        for name in filenames:
            if never_published(name):
                continue
            try:
                entry = _file(root, here / name)
            except PluginError as exc:
                problems.extend(exc.problems)
                continue
            total += entry.size
            if total > MAX_TOTAL_BYTES:
                raise PluginError(f"the plugin is larger than {MAX_TOTAL_BYTES} bytes in all")
            files.append(entry)
            if len(files) > MAX_FILES:
                raise PluginError(f"the plugin has more than {MAX_FILES} files")
    if problems:
        first = problems[0]
        raise PluginError(first.message, file=first.file, line=first.line, problems=problems)
    return tuple(sorted(files, key=lambda f: f.path))


def digest_of(files: tuple[PluginFile, ...]) -> str:
    """sha256 over the canonical listing: one `path NUL x|- NUL sha256 LF` line per file."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        h.update(f"{f.path}\0{'x' if f.executable else '-'}\0{f.sha256}\n".encode())
    return "sha256:" + h.hexdigest()


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _check_link(root: Path, path: Path) -> Path:
    target = path.resolve()
    if not target.is_relative_to(root):
        raise PluginError(
            f"symlink points outside the plugin directory (to {os.readlink(path)})",
            file=_rel(root, path),
        )
    return target


def _file(root: Path, path: Path) -> PluginFile:
    rel = _rel(root, path)
    target = _check_link(root, path) if path.is_symlink() else path
    try:
        info = target.stat()
    except FileNotFoundError:
        raise PluginError("broken symlink", file=rel) from None
    if not stat.S_ISREG(info.st_mode):
        raise PluginError("not a regular file", file=rel)
    if info.st_size > MAX_FILE_BYTES:
        raise PluginError(
            f"file is {info.st_size} bytes, over the limit of {MAX_FILE_BYTES}", file=rel
        )
    h = hashlib.sha256()
    with target.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return PluginFile(
        path=rel,
        executable=bool(info.st_mode & stat.S_IXUSR),
        size=info.st_size,
        sha256=h.hexdigest(),
    )
