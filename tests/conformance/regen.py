"""Rewrite tests/conformance/vectors/*.json from sources.py and the Python reducer.

Run `python -m tests.conformance.regen` after changing the reducer or a vector, and review
the diff of the expected states: that diff is the behaviour change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opennua.protocol.actions import action_from_dict
from opennua.protocol.reducer import SequenceGap, reduce
from opennua.protocol.state import initial_state
from tests.conformance.sources import VECTORS

VECTOR_DIR = Path(__file__).parent / "vectors"


def build(name: str) -> dict[str, Any]:
    description, make = VECTORS[name]
    actions = make().actions
    state = initial_state()
    vector: dict[str, Any] = {"name": name, "description": description, "actions": actions}
    for index, raw in enumerate(actions):
        try:
            state = reduce(state, action_from_dict(raw))
        except SequenceGap as gap:
            vector["expected_error"] = {
                "type": "sequence_gap",
                "index": index,
                "expected_seq": gap.expected,
            }
            break
    vector["expected_state"] = state
    return vector


def render(vector: dict[str, Any]) -> str:
    return json.dumps(vector, indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    VECTOR_DIR.mkdir(exist_ok=True)
    for stale in VECTOR_DIR.glob("*.json"):
        if stale.stem not in VECTORS:
            stale.unlink()
    for name in VECTORS:
        (VECTOR_DIR / f"{name}.json").write_text(render(build(name)), encoding="utf-8")
    print(f"wrote {len(VECTORS)} vectors to {VECTOR_DIR}")


if __name__ == "__main__":
    main()
