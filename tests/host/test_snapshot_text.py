"""A snapshot's text keeps the turns no action named since the last one: the text is
still byte for byte the whole state's, however the actions after it named turns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from opennua._common import json_text
from opennua.host._snapshot_text import KEEP_FROM, TurnTexts
from opennua.protocol import action_from_dict, initial_state, reduce
from tests.conformance.authoring import Log
from tests.protocol.test_properties import logs_with_late_actions


def _fold(log: Log, texts: TurnTexts, every: int) -> None:
    """Reduce `log`, encoding a snapshot every `every` actions and at each turn end, as a
    Host would; each must be the whole state's text."""
    state = initial_state()
    for n, raw in enumerate(log.actions, 1):
        state = reduce(state, action_from_dict(raw))
        texts.touched(raw["turn_id"])
        if n % every == 0 or raw["type"] == "turn.ended":
            assert texts.encode(state) == json_text(state)
    assert texts.encode(state) == json_text(state)


@settings(max_examples=100, deadline=None)
@given(log=logs_with_late_actions())
def test_snapshot_texts_are_the_whole_states_text(log: Log) -> None:
    _fold(log, TurnTexts(keep_from=0), every=3)


def test_a_late_action_on_an_ended_turn_is_in_the_next_snapshot() -> None:
    log = Log()
    log.session()
    for turn in ("trn_a", "trn_b"):
        log.turn(turn)
        log.start(turn)
        log.usage(turn, "run_root", n=1)
        log.end(turn)
    texts = TurnTexts(keep_from=0)
    state = initial_state()
    for raw in log.actions:
        state = reduce(state, action_from_dict(raw))
        texts.touched(raw["turn_id"])
    first = texts.encode(state)
    log.usage("trn_a", "run_root", n=5)  # a late usage names the first, ended turn
    late = log.actions[-1]
    state = reduce(state, action_from_dict(late))
    texts.touched(late["turn_id"])
    second = texts.encode(state)
    assert second != first and second == json_text(state)


@pytest.mark.parametrize("keep_from", [0, KEEP_FROM])
def test_what_orjson_refuses_is_encoded_whole_by_the_standard_library(keep_from: int) -> None:
    log = Log()
    log.session()
    log.turn("trn_a")
    log.start("trn_a")
    log.add(
        "tool_call.started",
        {
            "tool_call_id": "call_1",
            "name": "n",
            "title": "t",
            "kind": "other",
            "input": {"n": 2**70},
        },
        turn="trn_a",
        run="run_root",
    )
    log.end("trn_a")
    _fold(log, TurnTexts(keep_from=keep_from), every=1)
