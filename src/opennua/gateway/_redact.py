"""Exact secret values never reach the runtime: every byte the gateway returns (bodies
and headers) has each value it injected replaced by `[redacted:<name>]`.

A JSON encoder may write any character of a value as an escape — `\\/` for `/`, `\\u0061`
or `\\u0041`-style hex in either case, a surrogate pair, mixed freely — and the runtime's
JSON decoder turns each back into the value. So matching is done on what a decoder sees:

1. A value is matched by one pattern that accepts, for each of its characters, the
   character itself or any JSON escape of it (`escaped_pattern`). That alone covers a
   raw value and one level of escaping anywhere (a header, a non-JSON body).
2. A JSON body (and the JSON in each event of an SSE body, its `data:` lines joined) is
   decoded and every string in it — keys too — is matched: that covers a value escaped
   twice (a tool's JSON text inside the JSON-RPC answer). A string that is itself JSON
   text is decoded in turn, a few levels deep. The body is re-encoded only when something
   was replaced, so an answer without a secret passes byte for byte.
3. What a reader derives from the decoded answer must not re-form a value either: the
   re-encoded answer and Python's default `json.dumps` of it (the runtime's text of a
   structured tool result) are matched again. A value that spans the JSON structure (say
   it contains `","`) cannot be cut out of one string, so that message is withheld whole:
   a JSON-RPC error with the message's id (fail closed).

A value the service transforms otherwise (base64, hashed, split into pieces the runtime
does not join) is not recognised; docs/gateway.md says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: JSON's two-character escapes.
_SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}
#: How deep JSON text inside a string is decoded (a result's text holding JSON holding…).
_DEPTH = 3
#: The JSON-RPC error code of a refused call or a withheld answer (`data.code` says why;
#: runtime/_mcp.py reads it).
REFUSED = -32003


def _hex_escape(code: int) -> str:
    digits = "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{code:04x}")
    return r"\\u" + digits


def _char_pattern(c: str) -> str:
    forms = [re.escape(c)]
    if c in _SHORT:
        forms.append(re.escape("\\" + _SHORT[c]))
    code = ord(c)
    if code < 0x10000:
        forms.append(_hex_escape(code))
    else:  # outside the BMP a JSON encoder writes a surrogate pair
        code -= 0x10000
        forms.append(_hex_escape(0xD800 + (code >> 10)) + _hex_escape(0xDC00 + (code & 0x3FF)))
    return "(?:" + "|".join(forms) + ")"


def escaped_pattern(value: str) -> str:
    """A regular expression matching `value` with any of its characters JSON-escaped."""
    return "".join(_char_pattern(c) for c in value)


#: What JSON allows outside strings: a value made only of these can match there (a
#: number, `true`, between tokens), where no decoded string holds it.
_OUTSIDE_STRINGS = frozenset("0123456789+-.eEtrufalsn,:[]{} \t\n\r")


class Redactor:
    def __init__(self, values: Mapping[str, str]) -> None:
        # Longest first: a value that contains another is replaced whole.
        named = sorted(((n, v) for n, v in values.items() if v), key=lambda p: -len(p[1]))
        self._values = [v for _, v in named]
        self._marks = [f"[redacted:{name}]" for name, _ in named]
        alternatives = "|".join(f"(?P<v{i}>{escaped_pattern(v)})" for i, (_, v) in enumerate(named))
        self._pattern = re.compile(alternatives) if named else None
        # Every form of a value is the value itself or holds an escape of one of its
        # characters: without one of these clues in a text, no value is in it (a search
        # for them spares the pattern most texts).
        clues = {"\\u", *self._values}
        clues |= {"\\" + _SHORT[c] for v in self._values for c in v if c in _SHORT}
        self._clues = re.compile("|".join(re.escape(c) for c in sorted(clues)))
        #: Whether a value can match across a JSON document's structure rather than in
        #: one of its strings: only one with a quote, or made of what may stand outside.
        self._spans = any('"' in v or set(v) <= _OUTSIDE_STRINGS for v in self._values)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def _mark(self, match: re.Match[str]) -> str:
        assert match.lastgroup is not None
        return self._marks[int(match.lastgroup[1:])]

    def text(self, data: str) -> str:
        """Every value in `data`, raw or with characters JSON-escaped, replaced."""
        if self._pattern is None or not self._clues.search(data):
            return data
        return self._pattern.sub(self._mark, data)

    def _found(self, data: str) -> bool:
        if self._pattern is None or not self._clues.search(data):
            return False
        return self._pattern.search(data) is not None

    def body(self, data: bytes, content_type: str) -> bytes:
        """An HTTP answer's body: JSON and SSE decoded (see the module docstring); bytes
        that are not UTF-8 pass through as they were."""
        if self._pattern is None:
            return data
        text = data.decode("utf-8", "surrogateescape")
        media = content_type.split(";")[0].strip().lower()
        if media == "text/event-stream":
            out = self._events(text)
        elif media == "application/json" or media.endswith("+json"):
            out = self._json(text)
        else:
            out = self.text(text)
        return data if out is text else out.encode("utf-8", "surrogateescape")

    # -- decoded ---------------------------------------------------------------------------

    def _json(self, text: str, depth: int = _DEPTH) -> str:
        """JSON text with every value replaced in its decoded strings; `text` itself (the
        same object) when nothing was; `self.text(text)` when it is not JSON."""
        try:
            value = json.loads(text)
        except ValueError:
            out = self.text(text)
            return text if out == text else out
        walked, changed = self._walk(value, depth)
        out = json.dumps(walked, ensure_ascii=False, separators=(",", ":")) if changed else text
        if self._spans and (self._found(out) or self._found(json.dumps(walked))):
            return json.dumps(_withheld(walked), separators=(",", ":"))
        return out

    def _walk(self, value: Any, depth: int) -> tuple[Any, bool]:
        """`value` with every string (keys too) redacted, and whether anything was; an
        unchanged container is returned as it was."""
        if isinstance(value, str):
            out = self._string(value, depth)
            return out, out is not value
        if isinstance(value, list):
            items: list[Any] | None = None
            for i, item in enumerate(value):
                new, changed = self._walk(item, depth)
                if changed:
                    items = items or list(value)
                    items[i] = new
            return (value, False) if items is None else (items, True)
        if isinstance(value, dict):
            pairs = [(self._walk(k, depth), self._walk(v, depth)) for k, v in value.items()]
            if any(kc or vc for (_, kc), (_, vc) in pairs):
                return {k: v for (k, _), (v, _) in pairs}, True
            return value, False
        return value, False

    def _string(self, value: str, depth: int) -> str:
        out = self.text(value)
        if out == value:
            out = value  # the same object: "unchanged" is an identity test above
        # JSON text inside the string (a tool's JSON result) hides a value one more
        # level down only behind an escaped backslash (`\\`, `\u005c`): only then is it
        # decoded.
        hidden = "\\\\" in out or "\\u005" in out
        if depth > 1 and hidden and out.lstrip()[:1] in ("{", "[", '"'):
            nested = self._json(out, depth - 1)
            if nested is not out:
                return nested
        return out

    def _events(self, text: str) -> str:
        """An SSE body, event by event: each event's data (its `data:` lines joined with
        newlines, as a reader joins them) redacted as JSON, its other fields as text."""
        events: list[list[str]] = [[]]
        for line in re.split(r"\r\n|\r|\n", text):
            if line:
                events[-1].append(line)
            elif events[-1]:
                events.append([])
        out, changed = [], False
        for lines in events:
            if not lines:
                continue
            data = [_field_value(line) for line in lines if _field(line) == "data"]
            others = [line for line in lines if _field(line) != "data"]
            joined = "\n".join(data)
            new_data = self._json(joined) if data else joined
            new_others = [self.text(line) for line in others]
            if new_data is not joined or new_others != others:
                changed = True
                lines = new_others + [f"data: {d}" for d in new_data.split("\n")]
            out.append("\n".join(lines))
        return "\n\n".join(out) + "\n\n" if changed else text


def _field(line: str) -> str:
    return line.partition(":")[0]


def _field_value(line: str) -> str:
    value = line.partition(":")[2]
    return value[1:] if value.startswith(" ") else value


def _withheld(value: Any) -> Any:
    """What replaces a JSON-RPC message (or each of a batch) that holds a value across its
    structure: an error answering the same request id, so the caller's call fails."""
    if isinstance(value, list):
        return [_withheld(v) for v in value]
    error = {
        "code": REFUSED,
        "message": "gateway withheld the answer: it held a credential it could not cut out",
        "data": {"code": "credential_withheld"},
    }
    request_id = value.get("id") if isinstance(value, dict) else None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
