"""A stored snapshot's text, encoding again only the turns that changed since the last.

A snapshot is the whole state, and a long session's state is mostly its turns: at a turn
end, every earlier turn is as the last snapshot wrote it. The reducer changes a turn only
for an action that names it (its `turn_id`; docs/protocol.md), so a Host keeps each turn's
JSON from the last snapshot and encodes again only the turns that the actions folded since
named. Encoding whole states was 3.3 % of a busy server's Python time (py-spy,
`benchmarks/peers_server.py` at N = 10, where a session's state reaches ~400 KB).

The text is byte for byte what `json_text(state)` writes: orjson keeps the state's key
order, and a kept turn goes in as the `orjson.Fragment` it was.
"""

from __future__ import annotations

import orjson

from opennua._common import json_text
from opennua.protocol import SessionState

#: A state whose text is shorter is encoded whole and nothing is kept (~60 us at most):
#: a parked session's memory stays its state alone.
KEEP_FROM = 64 * 1024


class TurnTexts:
    """One cached session's turn texts from its last snapshot, and the turns named since."""

    __slots__ = ("_keep_from", "_texts", "_touched")

    def __init__(self, *, keep_from: int = KEEP_FROM) -> None:
        self._keep_from = keep_from
        self._texts: dict[str, bytes] = {}
        self._touched: set[str] = set()

    def touched(self, turn_id: str | None) -> None:
        """An action naming `turn_id` was folded."""
        if turn_id is not None and self._texts:
            self._touched.add(turn_id)

    def encode(self, state: SessionState) -> str:
        """The snapshot text of `state`; the turn texts are kept for the next one."""
        kept, touched = self._texts, self._touched
        self._texts, self._touched = {}, set()
        try:
            if not kept:
                # Whole, in one call: a young session's state is small, and encoding its
                # turns one by one would cost more than it saves.
                body = orjson.dumps(state)
                if len(body) >= self._keep_from:
                    self._texts = {t["turn_id"]: orjson.dumps(t) for t in state["turns"]}
                return body.decode()
            texts = {}
            for turn in state["turns"]:
                turn_id = turn["turn_id"]
                text = kept.get(turn_id) if turn_id not in touched else None
                texts[turn_id] = text if text is not None else orjson.dumps(turn)
            whole = {**state, "turns": [orjson.Fragment(t) for t in texts.values()]}
            body = orjson.dumps(whole)
        except TypeError:  # orjson.JSONEncodeError is one: what it refuses, whole
            return json_text(state)
        if len(body) >= self._keep_from:
            self._texts = texts
        return body.decode()
