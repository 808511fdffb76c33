"""JSON, fast: orjson (~5-10x the standard library) both ways, and the standard library
for what orjson refuses or would read differently. Text written here is compact and
always valid UTF-8 (a lone surrogate escaped), so every transport can send it."""

from __future__ import annotations

import json
import re
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
_LONG_DIGITS = re.compile(r"[0-9]{19}")
_LONG_DIGITS_BYTES = re.compile(rb"[0-9]{19}")


def json_value(text: str | bytes) -> Any:
    """The value of JSON text: orjson where it reads exactly what the standard library
    would, the standard library for the rest (a lone surrogate, NaN, a number past a double
    or past 64 bits). Raises ValueError (json.JSONDecodeError) for text that is not JSON."""
    long = _LONG_DIGITS.search(text) if isinstance(text, str) else _LONG_DIGITS_BYTES.search(text)
    if long is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
