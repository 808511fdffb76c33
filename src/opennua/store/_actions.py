"""Action envelopes as the store writes and reads them (both backends).

An envelope is checked and encoded once, when the caller hands it over, not in the
writer: a value the store cannot store fails that caller alone, before anything is
queued, and the writer only puts each seq in place. The stored body is the envelope
with its ``seq`` (on PostgreSQL ``0``: its append function assigns seqs) and ``0`` in
place of the fields the row holds in columns (session, id, type: ~100 bytes of every
action); the placeholders keep the envelope's key order for :func:`action_from_row`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from opennua._common import json_value

from ._bodies import unpack
from ._errors import InvalidInput
from ._json import check_text, dumps

Action = dict[str, Any]

#: Stands for the seq while a body is encoded, then the text is split at it. Below 2**63
#: so orjson writes it; another is tried if a body happens to contain it already.
_SEQ_MARK = 7_654_321_098_765_432_109
_MARKS = [(m, f'"seq":{m}') for m in range(_SEQ_MARK, _SEQ_MARK + 8)]


class EncodedAction(NamedTuple):
    """An envelope ready to store: its column fields, and its stored body's JSON text
    before and after the seq value, which the backend assigns (``head + seq + tail``).
    (A named tuple: one is made per action on the hot path, a frozen dataclass costs
    twice as much to build.)"""

    action_id: str
    type: str
    #: The session the envelope names, if it names one (checked against the target).
    session_id: str | None
    head: str
    tail: str

    def body(self, seq: int) -> str:
        return f"{self.head}{seq}{self.tail}"


def encode_actions(
    session_id: str | None, actions: Sequence[Mapping[str, Any]]
) -> tuple[EncodedAction, ...]:
    """Check the envelope fields the store relies on and encode each body.

    ``session_id`` None means "not known yet" (an input request's session is read at
    commit time); :func:`check_session` runs then.
    """
    out = []
    for a in actions:
        if type(a) is not dict and not isinstance(a, Mapping):
            raise InvalidInput(f"an action must be a mapping, got {type(a).__name__}")
        action_id, action_type = a.get("id"), a.get("type")
        if type(action_id) is not str or not action_id:
            raise InvalidInput("an action needs a non-empty string 'id'")
        if not action_id.isascii():
            check_text(action_id, "an action id")
        if type(action_type) is not str or not action_type:
            raise InvalidInput(f"action {action_id!r} needs a non-empty string 'type'")
        if not action_type.isascii():
            check_text(action_type, f"action {action_id!r}'s type")
        owner = a.get("session_id")
        if owner is not None and (
            type(owner) is not str or (session_id is not None and owner != session_id)
        ):
            target = f"{session_id!r}" if session_id is not None else "its session"
            raise InvalidInput(f"action {action_id!r} belongs to {owner!r}, not {target}")
        try:
            head, tail = _split_body(a)
        except InvalidInput as exc:
            raise InvalidInput(f"action {action_id!r}: {exc.reason}") from exc
        out.append(EncodedAction(action_id, action_type, owner, head, tail))
    return tuple(out)


def check_session(session_id: str, actions: Sequence[EncodedAction]) -> None:
    """For actions encoded before their session was known: do they name another one?"""
    for a in actions:
        if a.session_id not in (None, session_id):
            raise InvalidInput(f"action {a.action_id!r} does not belong to {session_id!r}")


def _split_body(action: Mapping[str, Any]) -> tuple[str, str]:
    body = dict(action)
    body["session_id"] = body["id"] = body["type"] = 0
    if "seq" not in body:  # then it goes last
        return dumps(body, "its body")[:-1] + ',"seq":', "}"
    for mark, key in _MARKS:
        body["seq"] = mark
        text = dumps(body, "its body")
        # Exactly one match is the top-level key: an escaped quote or a nested "seq"
        # with the same value would make a second one.
        at = text.find(key)
        if at >= 0 and text.find(key, at + 1) < 0:
            return text[: at + 6], text[at + len(key) :]  # 6: len('"seq":')
    raise InvalidInput("its body cannot be stored: it repeats the store's seq marks")


def action_from_row(
    session_id: str, action_id: str, action_type: str, body: str | bytes, seq: int | None = None
) -> Action:
    """The envelope a row stores, whole again (JSON text, or a packed body). `seq`, the
    row's column, goes in place of the body's (PostgreSQL's packed bodies hold 0)."""
    action: Action = json_value(unpack(body))
    if action.get("id") == 0:  # else written whole, before bodies left the columns out
        action["session_id"], action["id"], action["type"] = session_id, action_id, action_type
    if seq is not None:
        action["seq"] = seq
    return action


def decode_action(session_id: str, action: EncodedAction, seq: int) -> Action:
    """The envelope as a read returns it, from what was handed to the store: what the
    process that committed an append hands its own subscribers instead of reading back."""
    return action_from_row(session_id, action.action_id, action.type, action.body(seq))
