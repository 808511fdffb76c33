"""`glob` and `grep`: read-only search of the workspace (Claude Code's `Glob` and `Grep`).

Confined like the file tools (`_files.confine`): a path is relative, with no `..`, and
resolves inside the workspace. The walk does not enter symlinked directories, and a
symlinked file is searched only when it resolves inside the workspace. Output is bounded
(`MAX_RESULTS` entries, `MAX_OUTPUT` bytes); files over `MAX_FILE_BYTES` and binary files
(a NUL in their first block) are not searched. These functions block on the disk: the
tools run them in a worker thread.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from opennua.runtime._errors import ToolError
from opennua.runtime._files import confine

MAX_RESULTS = 500
MAX_OUTPUT = 64 * 1024
MAX_FILE_BYTES = 1024 * 1024
MAX_LINE = 500
_BINARY_PROBE = 8192
#: Directories no one means to search (and that would swamp the results).
_SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})


@functools.lru_cache(maxsize=128)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob over `/`-separated relative paths: `*` and `?` stay within a name, `**`
    spans directories (`**/` also matches none), `[...]` is a set, `{a,b}` alternatives."""
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolError(f"pattern {pattern!r} must be relative to the workspace, without '..'")
    try:
        return re.compile("(?s:" + _translate(pattern) + r")\Z")
    except re.error as exc:
        raise ToolError(f"pattern {pattern!r} is not a glob: {exc}") from None


def _translate(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c in "[{" and (end := pattern.find("]" if c == "[" else "}", i + 1)) > i:
            body = pattern[i + 1 : end]
            if c == "{":
                out.append("(?:" + "|".join(_translate(o) for o in body.split(",")) + ")")
            else:
                body = body.replace("\\", "\\\\")
                out.append(f"[^{body[1:]}]" if body.startswith("!") else f"[{body}]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _files(workspace: Path, path: str) -> Iterator[tuple[str, Path]]:
    """(path relative to the workspace, host path) of every regular file under `path`."""
    root = workspace.resolve()
    base = root if path in ("", ".") else confine(workspace, path)
    if base.is_file():
        yield str(base.relative_to(root)), base
        return
    if not base.is_dir():
        raise ToolError(f"no such directory: {path}")
    for directory, dirs, names in os.walk(base):  # symlinked directories are not entered
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(names):
            host = Path(directory, name)
            if host.is_symlink():
                target = host.resolve()
                if target != root and root not in target.parents:
                    continue
            if host.is_file():
                yield str(host.relative_to(root)), host


def glob_files(workspace: Path, pattern: str, path: str = ".") -> str:
    regex = glob_regex(pattern)
    base = "" if path in ("", ".") else path.rstrip("/") + "/"
    found = []
    for rel, _ in _files(workspace, path):
        if regex.match(rel[len(base) :] if rel.startswith(base) else rel):
            found.append(rel)
            if len(found) > MAX_RESULTS:
                break
    return _bounded(found, "files") if found else "(no files match)"


def grep_files(
    workspace: Path,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    output: Literal["files_with_matches", "content", "count"] = "files_with_matches",
) -> str:
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"pattern {pattern!r} is not a regular expression: {exc}") from None
    only = glob_regex(glob) if glob else None
    rows: list[str] = []
    for rel, host in _files(workspace, path):
        if only is not None and not (only.match(rel) or only.match(host.name)):
            continue
        text = _text(host)
        if text is None:
            continue
        matches = [(n, line) for n, line in enumerate(text.splitlines(), 1) if regex.search(line)]
        if not matches:
            continue
        if output == "files_with_matches":
            rows.append(rel)
        elif output == "count":
            rows.append(f"{rel}:{len(matches)}")
        else:
            rows += [f"{rel}:{n}:{line[:MAX_LINE]}" for n, line in matches]
        if len(rows) > MAX_RESULTS:
            break
    return _bounded(rows, "lines" if output == "content" else "files") if rows else "(no matches)"


def _text(host: Path) -> str | None:
    try:
        if host.stat().st_size > MAX_FILE_BYTES:
            return None
        data = host.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:_BINARY_PROBE]:
        return None
    return data.decode(errors="replace")


def _bounded(rows: list[str], what: str) -> str:
    shown, size = [], 0
    for row in rows[:MAX_RESULTS]:
        size += len(row.encode()) + 1
        if size > MAX_OUTPUT:
            break
        shown.append(row)
    if len(shown) < len(rows):
        shown.append(f"… more {what} than shown ({len(shown)}); narrow the path or pattern")
    return "\n".join(shown)
