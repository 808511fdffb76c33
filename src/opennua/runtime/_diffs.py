"""What a file change reports: a unified diff for text, size and sha256 always.

Pure. The diff goes in the action when it is small (`DIFF_INLINE_LIMIT`); a bigger one is
stored as a blob by the tool and named by `diff_ref`, so the log stays small and history
shows exactly what the live view showed.
"""

from __future__ import annotations

import difflib
import hashlib

from opennua.protocol.actions import FileChanged

#: The largest diff carried inline (UTF-8 bytes); a bigger one goes by reference.
DIFF_INLINE_LIMIT = 8 * 1024


def is_text(data: bytes) -> bool:
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def unified_diff(path: str, before: bytes | None, after: bytes) -> str:
    """`--- a/path` / `+++ b/path` hunks (`/dev/null` for a created file), 3 lines of context."""
    old = [] if before is None else before.decode("utf-8").splitlines(keepends=True)
    new = after.decode("utf-8").splitlines(keepends=True)
    lines = difflib.unified_diff(
        old, new, "/dev/null" if before is None else f"a/{path}", f"b/{path}"
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)  # fmt: skip


def file_change(
    path: str, before: bytes | None, after: bytes, *, tool_call_id: str | None
) -> tuple[FileChanged, bytes | None]:
    """The change to report, and the diff to store by reference when it is too big inline
    (the caller stores it and sets `diff_ref`)."""
    binary = not is_text(after) or (before is not None and not is_text(before))
    diff = None if binary else unified_diff(path, before, after)
    big = diff is not None and len(diff.encode()) > DIFF_INLINE_LIMIT
    change = FileChanged(
        path=path,
        change="created" if before is None else "modified",
        tool_call_id=tool_call_id,
        size=len(after),
        sha256=hashlib.sha256(after).hexdigest(),
        binary=binary,
        diff=None if big else diff,
    )
    return change, (diff.encode() if big and diff is not None else None)
