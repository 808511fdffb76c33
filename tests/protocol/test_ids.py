from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from opennua.protocol.ids import PREFIXES, action_id, derived_id, kind_of, new_id, prefixed


def test_every_kind_has_its_prefix_and_a_ulid() -> None:
    for kind, prefix in PREFIXES.items():
        made = new_id(kind, ms=1_764_403_200_000, entropy=bytes(range(10)))
        assert made.startswith(prefix)
        assert len(made) == len(prefix) + 26
        assert kind_of(made) == kind


def test_ids_sort_by_time() -> None:
    earlier = new_id("turn", ms=1_000, entropy=b"\xff" * 10)
    later = new_id("turn", ms=1_001, entropy=b"\x00" * 10)
    assert earlier < later


def test_new_id_is_a_pure_function_of_its_inputs() -> None:
    assert new_id("run", ms=5, entropy=b"a" * 10) == new_id("run", ms=5, entropy=b"a" * 10)


def test_bad_entropy_or_time_is_refused() -> None:
    with pytest.raises(ValueError, match="entropy"):
        new_id("run", ms=5, entropy=b"short")
    with pytest.raises(ValueError, match="ms"):
        new_id("run", ms=-1, entropy=b"a" * 10)


def test_action_ids_are_deterministic_and_distinct() -> None:
    first = action_id("exe_1", "run_1/s3/delta/7")
    assert first == action_id("exe_1", "run_1/s3/delta/7")
    assert first.startswith("act_")
    assert first != action_id("exe_2", "run_1/s3/delta/7")
    assert first != action_id("exe_1", "run_1/s3/delta/8")
    # The separator keeps (producer, key) pairs from colliding by concatenation.
    assert action_id("ab", "c") != action_id("a", "bc")
    assert kind_of("nope_123") is None


def test_derived_ids_keep_the_formula_the_bridge_and_actions_were_minted_with() -> None:
    """Ids already stored (actions, a bridge's deliveries and intents) must derive again
    to the same value: the formula is sha256 of the parts joined by 0x1f, as a ULID."""

    def before(prefix: str, text: str) -> str:
        return prefix + str(ULID.from_bytes(hashlib.sha256(text.encode()).digest()[:16]))

    assert action_id("exe_1", "k") == before("act_", "exe_1\x1fk")
    assert derived_id("delivery", "ses_1", "act_9", "card") == before(
        "dlv_", "ses_1\x1fact_9\x1fcard"
    )
    assert derived_id("intent", "$event:matrix.org") == before("int_", "$event:matrix.org")


def test_ids_minted_outside_the_protocol_have_their_kinds_here() -> None:
    assert {"int_", "tok_", "sch_", "hok_", "dlv_", "aud_"} <= set(PREFIXES.values())
    assert kind_of(new_id("token", ms=1, entropy=bytes(10))) == "token"


def test_ids_made_in_one_millisecond_keep_their_order() -> None:
    """What a fake clock's test relies on: the default workspace sorts before a second."""
    from ulid import ULID

    made = [prefixed("workspace", ULID.from_timestamp(1_800_000_000.0)) for _ in range(50)]
    assert made == sorted(made) and len(set(made)) == 50


@given(st.integers(0, (1 << 48) - 1), st.binary(min_size=10, max_size=10))
def test_an_ids_text_is_the_ulid_spelling_of_its_bytes(ms: int, entropy: bytes) -> None:
    """Ids are spelled by opennua's own encoder: exactly as python-ulid spells the same 16
    bytes, so ids minted before it was written sort and compare as they did."""
    made = new_id("action", ms=ms, entropy=entropy)
    assert made == "act_" + str(ULID.from_bytes(ms.to_bytes(6, "big") + entropy))
    assert ULID.from_str(made[4:]).bytes == ms.to_bytes(6, "big") + entropy
