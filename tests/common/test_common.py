"""`opennua._common`: private files and the retry policy every package shares."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
from hypothesis import strategies as st

from opennua._common import RetryPolicy, env_flag, json_value, traces_enabled, write_private
from opennua._common._json import has_long_digits


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0)  # the mode must be 0600 whatever the umask lets through
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_private_file_is_0600_whole_and_leaves_nothing_aside(
    tmp_path: Path, open_umask: None
) -> None:
    path = tmp_path / "token"
    assert write_private(path, "one\n") is True
    assert path.read_text() == "one\n" and _mode(path) == 0o600
    assert write_private(path, "two\n") is True
    assert path.read_text() == "two\n" and _mode(path) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["token"]


def test_a_private_file_not_to_be_replaced_keeps_the_first_writers(tmp_path: Path) -> None:
    path = tmp_path / "secret.key"
    assert write_private(path, "first\n", replace=False) is True
    assert write_private(path, "second\n", replace=False) is False
    assert path.read_text() == "first\n"
    assert [p.name for p in tmp_path.iterdir()] == ["secret.key"]


def test_a_private_file_is_synced_before_it_is_renamed_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_private(tmp_path / "credentials.json", "{}")
    assert len(synced) == 2  # the file's content, then the directory's new entry


def test_the_retry_policy_doubles_up_to_its_cap_with_half_of_each_step_random() -> None:
    policy = RetryPolicy(base=1.0, cap=8.0)
    assert [policy.delay(n, 0.0) for n in (1, 2, 3, 4, 5, 60)] == [0.5, 1, 2, 4, 4, 4]
    assert policy.delay(3, 0.999) == pytest.approx(4.0, rel=1e-3)
    assert policy.delay(10_000, 0.5) == 6.0  # a huge retry count neither overflows nor grows


def test_the_retry_policy_gives_up_after_its_attempts_or_at_once_when_permanent() -> None:
    assert not RetryPolicy(max_attempts=0).gives_up(10_000)
    assert RetryPolicy(max_attempts=3).gives_up(3)
    assert not RetryPolicy(max_attempts=3).gives_up(2)
    assert RetryPolicy(max_attempts=3).gives_up(1, permanent=True)


def test_the_otel_flags_read_as_the_sdk_reads_them() -> None:
    assert env_flag({"X": " TRUE "}, "X") and not env_flag({"X": "0"}, "X")
    assert not traces_enabled({})
    assert traces_enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert not traces_enabled(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "b": [2.5, null, true], "c": "\\u00e9"}',
        '{"n": 1180591620717411303424}',  # 2**70: orjson would read a float
        '{"n": -9223372036854775809}',  # 19 digits, one past a signed 64-bit integer
        '{"n": 18446744073709551615}',
        '{"s": "\\ud800"}',  # a lone surrogate: orjson refuses it
        '{"x": NaN, "y": 1e400}',
        "[0.1234567890123456789]",
    ],
)
def test_json_value_reads_what_the_standard_library_reads(text: str) -> None:
    for given in (text, text.encode()):
        got, expected = json_value(given), json.loads(text)
        assert repr(got) == repr(expected)  # types too: an int stays an int
        if isinstance(got, dict) and "x" in got:
            assert math.isnan(got["x"])


def test_json_value_refuses_what_is_not_json() -> None:
    with pytest.raises(ValueError):
        json_value('{"a": ')


# Runs of digits around 19 long between other ASCII, letters that take two to four bytes
# in UTF-8 and lone surrogates.
_TEXTS = st.lists(
    st.one_of(
        st.text("0123456789", min_size=16, max_size=21),
        st.text(
            st.one_of(
                st.sampled_from('9 ."-e'),
                st.characters(min_codepoint=0x80),
                st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
            ),
            min_size=1,
            max_size=4,
        ),
    ),
    max_size=6,
).map("".join)


@hypothesis.given(_TEXTS)
def test_a_run_of_19_digits_is_found_as_the_regex_finds_it(text: str) -> None:
    expected = re.search("[0-9]{19}", text) is not None
    assert has_long_digits(text) is expected
    assert has_long_digits(text.encode("utf-8", "surrogatepass")) is expected
