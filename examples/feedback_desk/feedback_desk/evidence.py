"""The desk's evidence as an MCP server (streamable HTTP, at `/mcp`): search its tickets and
its knowledge base. The plugin reaches it only through opennua's gateway, which injects
the desk's API key from a workspace secret; the key never reaches the model or the sandbox.

What it returns leaves the desk, so it passes the same redaction as a dispatch.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from feedback_desk.db import Database
from feedback_desk.policy import redact

READ = ToolAnnotations(read_only_hint=True)
_WORD = re.compile(r"[a-z0-9]{3,}")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "have",
        "has",
        "was",
        "were",
        "are",
        "not",
        "but",
        "you",
        "your",
        "our",
        "when",
        "what",
        "after",
        "before",
        "into",
        "out",
        "can",
        "cannot",
        "does",
        "did",
        "how",
    ]
)


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _clean(text: str) -> str:
    return redact(text)[0]


def _snippet(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def search_tickets(db: Database, query: str, *, exclude: str | None = None) -> list[dict[str, Any]]:
    wanted = words(query)
    scored = []
    for ticket in db.tickets():
        if ticket["ticket_id"] == exclude:
            continue
        score = len(wanted & words(ticket["title"] + " " + ticket["body"]))
        if score:
            scored.append((score, ticket["seq"], ticket))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [
        {
            "ticket_id": t["ticket_id"],
            "title": _clean(t["title"]),
            "status": "closed" if t["closed"] else "open",
            "snippet": _snippet(_clean(t["body"])),
        }
        for _, _, t in scored[:5]
    ]


def search_articles(db: Database, query: str) -> list[dict[str, Any]]:
    wanted = words(query)
    scored = []
    for article in db.all("SELECT * FROM articles ORDER BY article_id"):
        score = len(wanted & words(article["title"] + " " + article["body"]))
        if score:
            scored.append((score, article))
    scored.sort(key=lambda item: -item[0])
    return [
        {"article_id": a["article_id"], "title": a["title"], "snippet": _snippet(a["body"])}
        for _, a in scored[:5]
    ]


def build_server(db: Database) -> MCPServer:
    server = MCPServer(
        "desk", instructions="The feedback desk's tickets and knowledge base.", log_level="WARNING"
    )

    @server.tool(name="search_tickets", annotations=READ)
    def _search_tickets(query: str) -> list[dict[str, Any]]:
        """Earlier tickets sharing words with `query`: ticket_id, title, status, snippet."""
        return search_tickets(db, query)

    @server.tool(name="get_ticket", annotations=READ)
    def _get_ticket(ticket_id: str) -> dict[str, Any]:
        """One ticket's redacted title, text and status."""
        ticket = db.ticket(ticket_id)
        if ticket is None:
            return {"error": f"no ticket {ticket_id}"}
        return {
            "ticket_id": ticket["ticket_id"],
            "title": _clean(ticket["title"]),
            "body": _clean(ticket["body"]),
            "status": "closed" if ticket["closed"] else "open",
        }

    @server.tool(name="search_articles", annotations=READ)
    def _search_articles(query: str) -> list[dict[str, Any]]:
        """Knowledge-base articles sharing words with `query`: article_id, title, snippet."""
        return search_articles(db, query)

    return server


def guarded(inner: Any, api_key: str) -> Any:
    """The MCP app behind the desk's API key (`Authorization: Bearer <key>`)."""
    expected = f"Bearer {api_key}".encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(got, expected):
                body = json.dumps(
                    {"type": "about:blank", "title": "Unauthorized", "status": 401,
                     "code": "unauthorized", "detail": "the desk's API key is required"}
                ).encode()  # fmt: skip
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/problem+json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await inner(scope, receive, send)

    return app
