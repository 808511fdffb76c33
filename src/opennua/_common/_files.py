"""Private files (tokens, keys, credentials): mode 0600 whatever the umask, whole or absent."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_private(path: Path, text: str, *, replace: bool = True) -> bool:
    """Write `text` to `path` with mode 0600. Written aside, flushed to disk and then
    renamed (or linked) into place, so no reader (another process sharing the directory, or
    the next boot after a crash) sees it half written. `replace=False` keeps a file that
    already exists (another process made it first) and answers False."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask may have masked the mode
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, path)
            written = True
        else:
            try:
                os.link(temporary, path)
                written = True
            except FileExistsError:
                written = False
    finally:
        temporary.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return written


def fsync_dir(path: Path) -> None:
    """Make a rename or link in `path` durable (best effort: some filesystems refuse)."""
    # The rename is durable once the directory is: without this a crash can lose the file.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
