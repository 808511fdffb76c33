"""The context policy: what the agent may see of a ticket, decided here, before anything
leaves the desk.

Pure functions over plain data. A ticket's fields are either *sent* (title, text, the
submitter's follow-ups) or *kept* (the submitter's name, email and the public link);
attachments are sent as redacted text excerpts (text and logs) or as a line naming them
(images, which the agent cannot use); personal data in everything sent — emails, phone
numbers, tokens — is replaced by a placeholder. `Context.record` says what was decided and
is stored with the dispatch, so a reviewer can see exactly what the agent was given.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

#: The fields the agent is given; every other field of a ticket stays in the desk.
SENT_FIELDS = ("title", "body")
KEPT_FIELDS = ("name", "email", "public_token")
TEXT_TYPES = ("text/plain", "text/x-log", "application/json", "text/csv")
EXCERPT_LINES = 40
EXCERPT_CHARS = 4000

# Order matters: tokens first (a token may contain an `@`), then emails, then phones (an
# email's digits are gone by then).
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "token",
        re.compile(
            r"(?i)\b(?:bearer\s+[A-Za-z0-9._~+/=-]{8,}"
            r"|(?:sk|pk|rk|ghp|gho|ghs|xox[abp]|whsec|glpat)[-_][A-Za-z0-9_-]{8,}"
            r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
            r"|(?:api[_-]?key|token|secret|password|passwd)\s*[:=]\s*\S{6,})"
        ),
    ),
    ("email", re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")),
    # International or local numbers: at least 7 digits, with a `+` or phone-like
    # separators; a version (`2.4.1`), a date, a count or a bare number is kept.
    ("phone", re.compile(r"(?<![\w.])(?:\+|\()?\d[\d ()-]{6,}\d(?![\w.])")),
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
PLACEHOLDERS = {"token": "[token]", "email": "[email]", "phone": "[phone]"}


def redact(text: str) -> tuple[str, Counter[str]]:
    """`text` with personal data replaced by placeholders, and how many of each kind."""
    counts: Counter[str] = Counter()
    for kind, pattern in _PATTERNS:
        if kind == "phone":
            text, found = pattern.subn(_phone(counts), text)
            continue
        text, found = pattern.subn(PLACEHOLDERS[kind], text)
        if found:
            counts[kind] += found
    return text, counts


def _phone(counts: Counter[str]) -> Any:
    def replace(match: re.Match[str]) -> str:
        found = match.group()
        plain = found.isdigit()  # a build number, an id: a phone has a `+` or separators
        if sum(c.isdigit() for c in found) < 7 or plain or _DATE.search(found):
            return found
        counts["phone"] += 1
        return PLACEHOLDERS["phone"]

    return replace


@dataclass(frozen=True)
class Attachment:
    attachment_id: str
    filename: str
    media_type: str
    size: int
    data: bytes


@dataclass(frozen=True)
class Context:
    """What one dispatch sends (`prompt`) and the record of the decisions behind it."""

    prompt: str
    record: dict[str, Any]


def excerpt(attachment: Attachment) -> str:
    """The first lines of a text attachment, at most `EXCERPT_CHARS`."""
    text = attachment.data.decode("utf-8", errors="replace")
    lines = text.splitlines()[:EXCERPT_LINES]
    return "\n".join(lines)[:EXCERPT_CHARS]


def build_context(
    ticket: dict[str, Any],
    attachments: list[Attachment],
    *,
    follow_up: str | None = None,
) -> Context:
    """The prompt of a first dispatch (the ticket) or of a follow-up (the new message and
    the attachments it brought), with its record."""
    counts: Counter[str] = Counter()

    def clean(text: str) -> str:
        cleaned, found = redact(text)
        counts.update(found)
        return cleaned

    parts: list[str] = []
    if follow_up is None:
        parts.append(f"Ticket {ticket['ticket_id']}: {clean(ticket['title'])}")
        parts.append(clean(ticket["body"]))
        fields = list(SENT_FIELDS)
    else:
        parts.append(f"Follow-up from the submitter of ticket {ticket['ticket_id']}:")
        parts.append(clean(follow_up))
        fields = ["follow_up"]
    decided: list[dict[str, Any]] = []
    for item in attachments:
        entry = {
            "attachment_id": item.attachment_id,
            "filename": item.filename,
            "media_type": item.media_type,
            "size": item.size,
        }
        if item.media_type in TEXT_TYPES:
            parts.append(f"Attachment {clean(item.filename)} (excerpt):\n{clean(excerpt(item))}")
            entry["sent"] = "redacted excerpt"
        else:
            parts.append(f"Attachment {clean(item.filename)}: {item.media_type}, not shown")
            entry["sent"] = "name and type only"
        decided.append(entry)
    record = {
        "fields_sent": fields,
        "fields_kept": list(KEPT_FIELDS),
        "attachments": decided,
        "redactions": dict(sorted(counts.items())),
    }
    return Context(prompt="\n\n".join(parts), record=record)
