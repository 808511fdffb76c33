"""Prefixed ULID identities (docs/architecture.md §2).

Pure: the caller passes the time and the random bytes in, so ids are reproducible in tests
and the protocol never touches a clock or an entropy source. Action ids are derived, not
random: the same fact re-emitted by a resumed attempt gets the same id and deduplicates.
"""

from __future__ import annotations

import hashlib
from typing import Final, Literal

from ulid import ULID

__all__ = [
    "PREFIXES",
    "IdKind",
    "action_id",
    "derived_id",
    "kind_of",
    "new_id",
    "prefixed",
]

IdKind = Literal[
    "session",
    "turn",
    "execution",
    "attempt",
    "run",
    "message",
    "call",
    "request",
    "artifact",
    "client",
    "principal",
    "workspace",
    "action",
    "intent",
    "token",
    "schedule",
    "hook",
    "delivery",
    "audit",
]

PREFIXES: Final[dict[IdKind, str]] = {
    "session": "ses_",
    "turn": "trn_",
    "execution": "exe_",
    "attempt": "att_",
    "run": "run_",
    "message": "msg_",
    "call": "call_",
    "request": "req_",
    "artifact": "art_",
    "client": "cli_",
    "principal": "prn_",
    "workspace": "wsp_",
    "action": "act_",
    "intent": "int_",
    "token": "tok_",
    "schedule": "sch_",
    "hook": "hok_",
    "delivery": "dlv_",
    "audit": "aud_",
}

_RANDOM_BYTES: Final = 10

# A ULID's text is its 128 bits in Crockford's base32 (two zero bits in front): 13 groups
# of 10 bits, each two characters of this table. python-ulid spells it a character at a
# time through a ULID object, twice as slow, and every action and message id is one (~1.5 %
# of a busy server's time in py-spy, `benchmarks/peers_server.py`).
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
_SHIFTS = tuple(range(120, -1, -10))


def _ulid_text(raw: bytes) -> str:
    """The 26-character text of the ULID whose 16 bytes are `raw`."""
    n = int.from_bytes(raw, "big")
    return "".join([_PAIRS[(n >> shift) & 1023] for shift in _SHIFTS])


def new_id(kind: IdKind, *, ms: int, entropy: bytes) -> str:
    """A new id of `kind` for the time `ms` (unix milliseconds) and 10 bytes of `entropy`."""
    if len(entropy) != _RANDOM_BYTES:
        raise ValueError(f"entropy must be {_RANDOM_BYTES} bytes, got {len(entropy)}")
    if not 0 <= ms < 1 << 48:
        raise ValueError(f"ms out of the ULID range: {ms}")
    return PREFIXES[kind] + _ulid_text(ms.to_bytes(6, "big") + entropy)


def prefixed(kind: IdKind, ulid: ULID) -> str:
    """`kind`'s id for a ULID the caller made. Records made by the injected clock use
    `ULID.from_timestamp(now)`, whose random part grows within a millisecond: ids made in
    one (a fake clock's whole test) keep the order they were made in."""
    return PREFIXES[kind] + _ulid_text(ulid.bytes)


def derived_id(kind: IdKind, *parts: str) -> str:
    """The id of `kind` derived from `parts`: the same parts always give the same id (a
    bridge that sees a platform event again derives the same intent and delivery ids).
    The parts are hashed, so the id leaks none of them."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()[:16]
    return PREFIXES[kind] + _ulid_text(digest)


def action_id(producer: str, event_key: str) -> str:
    """The deterministic id of the action that `producer` emits for `event_key`.

    `producer` names who emits (an execution id, a host intent scope); `event_key` names the
    fact within it (run, step, ordinal).
    """
    return derived_id("action", producer, event_key)


def kind_of(identifier: str) -> IdKind | None:
    """The kind an id's prefix names, or None when it has no known prefix."""
    for kind, prefix in PREFIXES.items():
        if identifier.startswith(prefix):
            return kind
    return None
