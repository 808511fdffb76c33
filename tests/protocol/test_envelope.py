"""The envelope and timestamp every producer of actions builds with."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from opennua.protocol import action_from_dict, envelope, timestamp


def test_an_envelope_is_an_action_once_the_host_gives_it_a_seq() -> None:
    raw = envelope(
        "ses_1",
        "act_1",
        "session.updated",
        timestamp(1_800_000_000.0),
        {"title": "renamed"},
        client_id="cli_1",
        intent_id="int_1",
    )
    assert list(raw) == [
        "v", "session_id", "id", "type", "ts", "turn_id", "run_id", "client_id", "intent_id",
        "data",
    ]  # fmt: skip
    action = action_from_dict({**raw, "seq": 1})
    assert action.v == 1 and action.type == "session.updated"
    assert (action.turn_id, action.run_id) == (None, None)
    assert (action.client_id, action.intent_id) == ("cli_1", "int_1")


@pytest.mark.parametrize(
    ("now", "ts"),
    [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (1_800_000_000.1234, "2027-01-15T08:00:00.123Z"),
        (1_000_000_000.9995, "2001-09-09T01:46:40.999Z"),
        (253402300799.5, "9999-12-31T23:59:59.500Z"),
    ],
)
def test_a_timestamp_is_utc_with_milliseconds_truncated(now: float, ts: str) -> None:
    assert timestamp(now) == ts
    moment = datetime.fromtimestamp(now, UTC)  # what it was spelled with before
    assert ts == moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
