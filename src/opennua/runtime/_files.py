"""Workspace files, confined: what the file tools may open, and how.

A path is relative to the workspace, with no `..`, no NUL and no component over 255 bytes;
symlinks may point anywhere inside the workspace and nowhere else. Only regular files with
one link are read or written: a FIFO or a device would block (or worse) and a hard link may
be the other name of a file outside. The check and the open are the same file: every
directory is opened with `O_NOFOLLOW` relative to its parent, the file is `lstat`ed, opened
`O_NOFOLLOW | O_NONBLOCK` (an open never blocks) and `fstat`ed to be the inode that was
checked. Errors are `ToolError`s naming the path as the agent gave it, never a host path.

These functions block on the disk: the tools run them in a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from opennua.runtime._errors import ToolError

NAME_MAX = 255
PATH_MAX = 4096
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _shown(relative: str) -> str:
    return repr(relative if len(relative) <= 200 else relative[:200] + "…")


def confine(workdir: Path, relative: str) -> Path:
    """`relative` inside `workspace` (symlinks resolved), or a `ToolError` that says why not.

    Refused: empty and absolute paths, NUL bytes, names the file system cannot hold, any
    `..` component, and paths whose resolution (symlinks followed) leaves the workspace.
    """
    if not relative or relative.strip() == "":
        raise ToolError("path must not be empty")
    if "\x00" in relative:
        raise ToolError(f"path {_shown(relative)} contains a NUL byte")
    try:
        size = len(relative.encode())
    except UnicodeEncodeError:
        raise ToolError(f"path {_shown(relative)} is not valid Unicode") from None
    if size > PATH_MAX:
        raise ToolError(f"path {_shown(relative)} is longer than {PATH_MAX} bytes")
    pure = PurePosixPath(relative)
    if pure.is_absolute() or Path(relative).is_absolute():
        raise ToolError(
            f"path {_shown(relative)} is absolute; use a path relative to the workspace"
        )
    if ".." in pure.parts:
        raise ToolError(
            f"path {_shown(relative)} contains '..'; paths must stay inside the workspace"
        )
    if any(len(part.encode()) > NAME_MAX for part in pure.parts):
        raise ToolError(f"path {_shown(relative)} has a name longer than {NAME_MAX} bytes")
    root = workdir.resolve()
    try:
        target = (root / pure).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise ToolError(f"path {_shown(relative)} cannot be resolved (symlink loop)") from None
    if target != root and root not in target.parents:
        raise ToolError(f"path {_shown(relative)} leads outside the workspace (symlink)")
    return target


def _error(relative: str, exc: OSError) -> ToolError:
    reason = os.strerror(exc.errno) if exc.errno else type(exc).__name__
    return ToolError(f"{_shown(relative)}: {reason}")


@contextmanager
def _parent(workdir: Path, relative: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """The open directory holding `relative`'s target and the target's name in it. With
    `create`, missing directories on the way are made."""
    root = workdir.resolve()
    target = confine(workdir, relative)
    if target == root:
        raise ToolError(f"{_shown(relative)} is a directory, not a regular file")
    *dirs, name = target.relative_to(root).parts
    fd = os.open(root, _DIR_FLAGS)
    try:
        for i, part in enumerate(dirs):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise ToolError(f"no such file: {relative}") from None
                # Made meanwhile is fine: the open below checks what it is.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    prefix = "/".join(dirs[: i + 1])
                    raise ToolError(f"{_shown(prefix)} is not a directory") from None
                raise
            os.close(fd)
            fd = nxt
        yield fd, name
    except ToolError:
        raise
    except OSError as exc:
        raise _error(relative, exc) from None
    finally:
        os.close(fd)


_KINDS = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISFIFO, "is a named pipe (FIFO)"),
    (stat.S_ISSOCK, "is a socket"),
    (stat.S_ISCHR, "is a character device"),
    (stat.S_ISBLK, "is a block device"),
    (stat.S_ISLNK, "is a symbolic link"),
)


def _check(relative: str, st: os.stat_result) -> None:
    for test, what in _KINDS:
        if test(st.st_mode):
            raise ToolError(f"{_shown(relative)} {what}, not a regular file")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{_shown(relative)} is not a regular file")
    if st.st_nlink > 1:
        # Another name of the same file may be outside the workspace.
        raise ToolError(f"{_shown(relative)} has {st.st_nlink} hard links; refusing to open it")


def _open_checked(relative: str, dir_fd: int, name: str, flags: int) -> int:
    """Open an existing regular file, the very one `lstat` saw."""
    before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    _check(relative, before)
    fd = os.open(name, flags | _FILE_FLAGS, dir_fd=dir_fd)
    try:
        after = os.fstat(fd)
        _check(relative, after)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise ToolError(f"{_shown(relative)} changed while it was opened")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    os.ftruncate(fd, 0)
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)


def read_text(workdir: Path, relative: str) -> str:
    with _parent(workdir, relative) as (dir_fd, name):
        try:
            fd = _open_checked(relative, dir_fd, name, os.O_RDONLY)
        except FileNotFoundError:
            raise ToolError(f"no such file: {relative}") from None
        try:
            return _read_all(fd).decode(errors="replace")
        finally:
            os.close(fd)


def write_text(workdir: Path, relative: str, content: str) -> bytes | None:
    """Create or overwrite the file; its bytes before (None when it did not exist)."""
    data = content.encode()
    with _parent(workdir, relative, create=True) as (dir_fd, name):
        try:
            new = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS
            fd = os.open(name, new, 0o666, dir_fd=dir_fd)
            before = None
        except FileExistsError:
            # Not O_TRUNC: the file is truncated only once it is known to be the one checked.
            fd = _open_checked(relative, dir_fd, name, os.O_RDWR)
            before = b""
        try:
            if before is not None:
                before = _read_all(fd)  # for the change's diff
            _write_all(fd, data)
        finally:
            os.close(fd)
        return before


def edit_text(workdir: Path, relative: str, old: str, new: str) -> tuple[bytes, bytes]:
    """Replace the one occurrence of `old` with `new`; the file's bytes before and after."""
    with _parent(workdir, relative) as (dir_fd, name):
        try:
            fd = _open_checked(relative, dir_fd, name, os.O_RDWR)
        except FileNotFoundError:
            raise ToolError(f"no such file: {relative}") from None
        try:
            try:
                text = _read_all(fd).decode()
            except UnicodeDecodeError:
                raise ToolError(f"{_shown(relative)} is not UTF-8 text") from None
            count = text.count(old)
            if count != 1:
                raise ToolError(
                    f"`old` occurs {count} times in {relative}; it must occur exactly once"
                )
            after = text.replace(old, new, 1).encode()
            _write_all(fd, after)
            return text.encode(), after
        finally:
            os.close(fd)


def list_tree(workdir: Path, relative: str) -> list[str]:
    """Every entry under a workspace directory, relative to the workspace (directories with
    a trailing `/`), sorted. Symlinked directories are listed, not entered."""
    root = workdir.resolve()
    base = root if relative in (".", "") else confine(workdir, relative)
    try:
        if not base.is_dir():
            raise ToolError(f"no such directory: {relative}")
        names = sorted(
            str(p.relative_to(root)) + ("/" if p.is_dir() else "")
            for p in base.rglob("*")
            if ".." not in p.relative_to(root).parts
        )
    except OSError as exc:
        raise _error(relative, exc) from None
    return names
