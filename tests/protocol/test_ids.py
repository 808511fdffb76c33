from __future__ import annotations

import pytest

from opennua.protocol.ids import PREFIXES, action_id, kind_of, new_id


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
