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

from opennua.plugins._errors import PluginError

#: Documented in docs/plugins.md ("Limits"). A plugin is an agent's definition and the code
#: of its MCP servers, not a data set: large inputs belong in artifacts or the workspace.
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_TOTAL_BYTES = 200 * 1024 * 1024
MAX_FILES = 10_000
#: Never part of a plugin: version control and byte-code caches.
SKIPPED_DIRS = frozenset({".git", "__pycache__"})


@dataclass(frozen=True)
class PluginFile:
    path: str  # relative, POSIX separators
    executable: bool
    size: int
    sha256: str  # hex


def list_files(root: Path) -> tuple[PluginFile, ...]:
    """Every file under `root`, sorted by path. A symlink is followed only to a file inside
    `root` (it is published as that file's bytes)."""
    root = root.resolve()
    if not root.is_dir():
        raise PluginError(f"{root} is not a directory")
    files: list[PluginFile] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if name in SKIPPED_DIRS:
                dirnames.remove(name)
            elif (here / name).is_symlink():
                _check_link(root, here / name)
                raise PluginError(
                    "a symlink to a directory is not supported; copy the directory",
                    file=_rel(root, here / name),
                )
        for name in filenames:
            entry = _file(root, here / name)
            total += entry.size
            if total > MAX_TOTAL_BYTES:
                raise PluginError(f"the plugin is larger than {MAX_TOTAL_BYTES} bytes in all")
            files.append(entry)
            if len(files) > MAX_FILES:
                raise PluginError(f"the plugin has more than {MAX_FILES} files")
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
