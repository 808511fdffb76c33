"""Intake rules: what a submission and its attachments may be. Pure checks; the routes turn a
`Refused` into RFC 9457 problem JSON (or the form page with the message)."""

from __future__ import annotations

import re
from pathlib import PurePath

MAX_ATTACHMENT_BYTES = 1024 * 1024
MAX_ATTACHMENTS = 3
MAX_TITLE = 200
MAX_BODY = 20_000
#: Allowed types, by extension: the browser's claimed type is not trusted.
TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".txt": "text/plain",
    ".log": "text/x-log",
    ".json": "application/json",
    ".csv": "text/csv",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]")
_MAGIC = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF8",
}


class Refused(Exception):
    """A submission the desk does not take: HTTP status, problem code, what to fix."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


def check_text(title: str, body: str) -> None:
    if not title.strip() or not body.strip():
        raise Refused(422, "invalid_feedback", "a title and a message are required")
    if len(title) > MAX_TITLE or len(body) > MAX_BODY:
        raise Refused(
            422, "invalid_feedback", f"at most {MAX_TITLE} characters of title, {MAX_BODY} of text"
        )


def check_attachment(filename: str, data: bytes) -> tuple[str, str]:
    """`(safe file name, media type)` of an allowed attachment; `Refused` otherwise."""
    # Only plain characters: the name is shown on pages and sent in a download's headers.
    name = _UNSAFE.sub("_", PurePath(filename.replace("\\", "/")).name)[:120] or "attachment"
    media_type = TYPES.get(PurePath(name).suffix.lower())
    if media_type is None:
        allowed = ", ".join(sorted(TYPES))
        raise Refused(415, "unsupported_attachment", f"{name}: allowed types are {allowed}")
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise Refused(413, "attachment_too_large", f"{name}: at most {MAX_ATTACHMENT_BYTES} bytes")
    magic = _MAGIC.get(media_type)
    if magic is not None and not data.startswith(magic):
        raise Refused(415, "unsupported_attachment", f"{name}: not a {media_type} file")
    if magic is None:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise Refused(415, "unsupported_attachment", f"{name}: not UTF-8 text") from None
    return name, media_type
