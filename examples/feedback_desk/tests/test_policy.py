"""The context policy: redaction of personal data and the record of what was sent."""

from __future__ import annotations

from feedback_desk.policy import Attachment, build_context, redact


def test_emails_phones_and_tokens_are_redacted() -> None:
    text = (
        "Mail jo.doe+desk@mail.example.co.uk or call +44 20 7946 0958 / (415) 555-0134; "
        "key sk-proj-AbCdEf1234567890, header Bearer eyJhbGciOi.J9eyJzdWIiOiIx.sig, "
        "github ghp_0123456789abcdefABCDEF, password: hunter2hunter2"
    )
    cleaned, counts = redact(text)
    for secret in ("jo.doe", "7946", "555-0134", "sk-proj", "eyJhbG", "ghp_", "hunter2"):
        assert secret not in cleaned, (secret, cleaned)
    assert counts == {"email": 1, "phone": 2, "token": 4}
    assert cleaned.startswith("Mail [email] or call [phone] / [phone];")


def test_versions_dates_and_counts_are_kept() -> None:
    text = "Since 4.2.1 on 2026-12-06, at 2026-12-06 10:00:07 40,000 rows, error 503, 20261206."
    assert redact(text) == (text, {})


def test_the_record_says_what_was_sent_and_what_was_kept() -> None:
    ticket = {"ticket_id": "T-1007", "title": "Crash", "body": "mail me: a@b.example",
              "name": "A", "email": "a@b.example"}  # fmt: skip
    log = Attachment("A-1", "app.log", "text/x-log", 30, b"ERROR boom token=abcdef123456\n")
    image = Attachment("A-2", "shot.png", "image/png", 9, b"\x89PNG\r\n\x1a\n0")
    context = build_context(ticket, [log, image])
    assert context.prompt.startswith("Ticket T-1007: Crash\n\nmail me: [email]")
    assert (
        "ERROR boom [token]" in context.prompt
        and "shot.png: image/png, not shown" in context.prompt
    )
    assert context.record == {
        "fields_sent": ["title", "body"],
        "fields_kept": ["name", "email", "public_token"],
        "attachments": [
            {"attachment_id": "A-1", "filename": "app.log", "media_type": "text/x-log",
             "size": 30, "sent": "redacted excerpt"},
            {"attachment_id": "A-2", "filename": "shot.png", "media_type": "image/png",
             "size": 9, "sent": "name and type only"},
        ],
        "redactions": {"email": 1, "token": 1},
    }  # fmt: skip
    follow = build_context(ticket, [], follow_up="also +1 212 555 0100")
    assert follow.prompt.endswith("also [phone]") and follow.record["fields_sent"] == ["follow_up"]
