"""Stored action bodies: deflated against a preset dictionary (store/_bodies.py)."""

from __future__ import annotations

import json

import pytest

from opennua.store import StoreError
from opennua.store._bodies import pack, unpack

STARTED = (
    '{"v":1,"session_id":0,"id":0,"type":0,"ts":"2026-11-29T13:41:01.451Z",'
    '"turn_id":"trn_01M8KRK8A8C9JPWRV85NT74VHH","run_id":"run_01JD0000000000000000000000",'
    '"client_id":null,"intent_id":null,"data":{"tool_call_id":"call_01KB7A0G006HGD01ZGXGX1F1E1",'
    '"name":"emit","title":"emit","kind":"other","input":{"i":64}},"seq":121}'
)
# STARTED as packed with dictionary 1 when it was introduced. Rows on users' disks hold
# bytes like these: if this stops decoding, the dictionary was edited, which must never be.
STARTED_PACKED_1 = bytes.fromhex(
    "0123d9558686ba46962186c65626865606867a26a686d85ce56be11de46de168e16ce915101e146661"
    "ea17626e12e6e181e95a2f17a0c7b000927c813deabc9dcc1d0ddc0d0ccc3cdc5d0c0ca3dc23dc230cd"
    "d0c5d4101044d7da9b999e02c014d81502eae5498a9646566520b8b4f4323c35a00"
)


def test_rows_written_with_dictionary_1_still_decode() -> None:
    assert unpack(STARTED_PACKED_1) == STARTED.encode()


@pytest.mark.parametrize(
    "text",
    [
        STARTED,
        "{}",
        json.dumps({"delta": 'é 漢字 \u2028 "q" \\', "n": [1, 2.5, None, True]}),
        json.dumps({"output": "x" * 200_000}),  # far past the 4 KiB window
        json.dumps({"output": "".join(chr(33 + (i * 7919) % 90) for i in range(50_000))}),
    ],
)
def test_pack_round_trips(text: str) -> None:
    packed = pack(text)
    assert packed[0] == 1
    assert unpack(packed) == text.encode()


def test_json_text_rows_read_as_they_are() -> None:
    assert unpack(STARTED) == STARTED  # SQLite's TEXT rows written before compression
    # PostgreSQL's rows written before, as the BYTEA the column became holds them
    assert unpack(STARTED.encode()) == STARTED.encode()


def test_an_action_body_shrinks_to_well_under_half() -> None:
    updated = STARTED.replace(
        '"name":"emit","title":"emit","kind":"other","input":{"i":64}',
        '"status":"completed","output":"done: 3 files changed","output_ref":null,"error":null',
    )
    for text in (STARTED, updated):
        assert len(pack(text)) < 0.45 * len(text), (len(pack(text)), len(text))


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        (b"", "unknown format"),
        (b"\x02" + pack(STARTED)[1:], "unknown format"),
        (pack(STARTED)[:-3], "truncated"),
        (b"\x01\xff" + pack(STARTED)[2:], "damaged"),
    ],
)
def test_a_damaged_body_is_a_store_error(stored: bytes, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        unpack(stored)
