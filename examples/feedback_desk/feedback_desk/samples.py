"""Sample data: earlier (closed) tickets and knowledge-base articles the investigation can
cite, and a few new tickets for the demo."""

from __future__ import annotations

from feedback_desk.db import Database

HISTORY = [
    (
        "Export to CSV crashes with an error",
        "Clicking Export > CSV on a report with more than 10,000 rows crashes the app with "
        "an error dialog. Smaller reports export fine.",
    ),
    (
        "Dark mode for the dashboard?",
        "Is there a way to switch the dashboard to dark mode? Would be nice for night shifts.",
    ),
    (
        "Password reset email never arrives",
        "I requested a password reset three times; no email. Spam folder is empty.",
    ),
]
ARTICLES = [
    (
        "KB-1",
        "Exporting large reports",
        "Reports over 10,000 rows are exported in the background: use Export > Scheduled "
        "export. The direct CSV export is limited and may fail on large reports.",
    ),
    (
        "KB-2",
        "Password reset emails",
        "Reset emails come from no-reply@desk.example; allow-list that sender. Links expire "
        "after 30 minutes.",
    ),
    (
        "KB-3",
        "Themes and dark mode",
        "The dashboard follows the system's light or dark setting since version 4.2.",
    ),
]
NEW = [
    (
        "CSV export crash on big report",
        "Export > CSV crashed again on our quarterly report (about 40,000 rows). "
        "Contact me at dana.kim@example.com or +1 415 555 0134.",
        "Dana Kim",
        "dana.kim@example.com",
    ),
    (
        "Please add keyboard shortcuts",
        "Would be nice to have keyboard shortcuts for the most common actions.",
        "Lee",
        "lee@example.org",
    ),
]


def load(db: Database, *, new: bool = True) -> list[str]:
    """Load the history and articles once; with `new`, the demo's open tickets too.
    Returns the ids of the open tickets created."""
    if db.one("SELECT 1 FROM articles") is not None:
        return []
    for article_id, title, body in ARTICLES:
        db.run("INSERT INTO articles VALUES (?, ?, ?)", article_id, title, body)
    for title, body in HISTORY:
        db.create_ticket(title, body, "earlier customer", "someone@example.net", closed=True)
    if not new:
        return []
    return [db.create_ticket(*ticket)["ticket_id"] for ticket in NEW]
