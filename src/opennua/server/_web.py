"""The web UI's files: plain ES modules shipped in the package, served at `/`
(docs/architecture.md §7).

`WebUI` is an ASGI middleware placed *in front of* the auth guard. The shell it serves
(HTML, CSS, JavaScript) is public code that holds no session data, so it loads without
credentials and can tell a logged-out visitor how to log in instead of answering with a
401 JSON body. Every byte of session data still comes from `/v1` behind the guard, and a
path that is not one of the shipped files falls through to the guard (401 before 404).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
PREFIX = "/ui/"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
}

# The page loads nothing but its own files and talks to nothing but its own origin.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# Not `no-referrer`: under that policy browsers send `Origin: null` on same-origin POSTs,
# and the guard refuses cookie-authenticated state changes without our own Origin.
REFERRER_POLICY = "same-origin"


@dataclass(frozen=True, slots=True)
class _File:
    body: bytes
    content_type: str
    etag: str


def load_files(root: Path = WEB_DIR) -> dict[str, _File]:
    """Every shippable file under `root`, keyed by URL path. Read once: only these are served,
    so no request path is ever joined onto the filesystem."""
    files: dict[str, _File] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or any(part.startswith((".", "_")) for part in relative.parts):
            continue
        content_type = CONTENT_TYPES.get(path.suffix)
        if content_type is None:
            continue
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        files[PREFIX + relative.as_posix()] = _File(body, content_type, etag)
    index = files.get(PREFIX + "index.html")
    if index is None:
        raise RuntimeError(f"the web UI is missing: no index.html under {root}")
    files["/"] = index
    return files


class WebUI:
    """Serve GET/HEAD of `/` and `/ui/<file>`; hand every other request to `app`."""

    def __init__(self, app: ASGIApp, *, root: Path = WEB_DIR) -> None:
        self.app = app
        self._files = load_files(root)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = None
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            found = self._files.get(scope["path"])
        if found is None:
            await self.app(scope, receive, send)
            return
        headers = [
            (b"content-type", found.content_type.encode()),
            (b"etag", found.etag.encode()),
            # Revalidate every time: a restarted server may ship new files, and a 304 is cheap.
            (b"cache-control", b"no-cache"),
            (b"x-content-type-options", b"nosniff"),
        ]
        if found.content_type.startswith("text/html"):
            headers += [
                (b"content-security-policy", CSP.encode()),
                (b"referrer-policy", REFERRER_POLICY.encode()),
                (b"x-frame-options", b"DENY"),
            ]
        if _if_none_match(scope) == found.etag:
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        headers.append((b"content-length", str(len(found.body)).encode()))
        body = b"" if scope["method"] == "HEAD" else found.body
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _if_none_match(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name.lower() == b"if-none-match":
            return str(value.decode("latin-1").strip())
    return None
