"""Every conformance vector, three ways: live, replay from zero, snapshot + tail at every split.

The web client runs the same files (tests/js); a reducer change that is not mirrored in the
vectors fails `test_vectors_are_current` here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opennua.protocol.actions import ACTION_TYPES, action_from_json
from opennua.protocol.reducer import SequenceGap, reduce, replay
from opennua.protocol.state import (
    SessionState,
    canonical_json,
    initial_state,
    state_from_json,
    state_to_json,
)
from tests.conformance.regen import VECTOR_DIR, build, render

FILES = sorted(VECTOR_DIR.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return vector


def _expected(vector: dict[str, Any]) -> str:
    return canonical_json(vector["expected_state"])


def _run(
    raw_actions: list[str], state: SessionState, start: int, vector: dict[str, Any]
) -> SessionState:
    """Apply raw JSON actions from index `start`, checking a declared gap where it occurs."""
    error = vector.get("expected_error")
    for index in range(start, len(raw_actions)):
        action = action_from_json(raw_actions[index])
        if error is not None and index == error["index"]:
            before = state_to_json(state)
            with pytest.raises(SequenceGap) as caught:
                reduce(state, action)
            assert caught.value.expected == error["expected_seq"]
            assert state_to_json(state) == before, "a gap must not change the state"
            return state
        state = reduce(state, action)
    assert error is None, "the declared gap never happened"
    return state


def _raw(vector: dict[str, Any]) -> list[str]:
    return [json.dumps(action) for action in vector["actions"]]


def test_there_are_enough_vectors_covering_every_action_type() -> None:
    assert len(FILES) >= 30
    seen = {action["type"] for path in FILES for action in _load(path)["actions"]}
    assert seen >= ACTION_TYPES, f"no vector uses {sorted(ACTION_TYPES - seen)}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_live_one_action_at_a_time(path: Path) -> None:
    vector = _load(path)
    state = _run(_raw(vector), initial_state(), 0, vector)
    assert state_to_json(state) == _expected(vector)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_replay_from_zero(path: Path) -> None:
    vector = _load(path)
    actions = [action_from_json(raw) for raw in _raw(vector)]
    if "expected_error" in vector:
        index = vector["expected_error"]["index"]
        state = replay(actions[:index])
        with pytest.raises(SequenceGap):
            replay(actions[index:], state)
    else:
        state = replay(actions)
    assert state_to_json(state) == _expected(vector)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_snapshot_plus_tail_at_every_split(path: Path) -> None:
    vector = _load(path)
    raw = _raw(vector)
    stop = vector.get("expected_error", {}).get("index", len(raw))
    for split in range(stop + 1):
        head = _run(raw[:split], initial_state(), 0, {"actions": raw[:split]})
        snapshot = state_to_json(head)
        resumed = state_from_json(snapshot)
        assert state_to_json(resumed) == snapshot, f"snapshot at {split} does not round-trip"
        state = _run(raw, resumed, split, vector)
        assert state_to_json(state) == _expected(vector), f"differs when split at {split}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_vectors_are_current(path: Path) -> None:
    """The committed file is what the sources and the reducer produce now."""
    assert path.read_text(encoding="utf-8") == render(build(path.stem)), (
        "stale vector: run `python -m tests.conformance.regen` and review the diff"
    )
