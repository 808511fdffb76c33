"""JSON, fast: orjson (~5-10x the standard library) both ways, and the standard library
for what orjson refuses or would read differently. Text written here is compact and
always valid UTF-8 (a lone surrogate escaped), so every transport can send it."""

from __future__ import annotations

import json
from typing import Any

import orjson


def json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        # Escaped, a lone surrogate is still JSON, where raw it would fail every UTF-8
        # encoder on its way out (and freeze a stream behind it).
        return json.dumps(value, separators=(",", ":"))


# orjson reads an integer outside 64 bits as a float, silently; any such integer has 19
# digits or more, so text with a run of 19 digits is read by the standard library (a hex
# digest or a long decimal fraction takes that slower path too; it reads the same).
# The run is found by mapping every digit to "0" and looking for nineteen of them: two
# passes in C, ~6x faster than the regex `[0-9]{19}`, which was most of a stored action's
# decode (a cold fold of 100,000 actions spent ~280 ms in it). UTF-8 puts no ASCII digit
# inside a multi-byte character, so the bytes have the run exactly when the text does.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_NINETEEN_ZEROS = b"0" * 19


def has_long_digits(text: str | bytes) -> bool:
    """Whether the text holds a run of 19 ASCII digits."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return _NINETEEN_ZEROS in raw.translate(_DIGITS_AS_ZERO)


def json_value(text: str | bytes) -> Any:
    """The value of JSON text: orjson where it reads exactly what the standard library
    would, the standard library for the rest (a lone surrogate, NaN, a number past a double
    or past 64 bits). Raises ValueError (json.JSONDecodeError) for text that is not JSON."""
    if not has_long_digits(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
