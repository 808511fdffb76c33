"""Remote text made safe to print: the one sanitizer every human-readable line goes through.

Titles, messages, reasoning, tool inputs and outputs, errors, plan entries, names, ids and
problem details all come from the server, and through it from a model, a tool or another
client. Printed raw they could drive the terminal (`ESC[8m` hidden text, OSC 8 links, OSC 52
clipboard writes, `ESC[2J`), so nothing reaches it raw: `clean()` turns every control
character, bidi control and lone surrogate into a visible stand-in (`ESC[2J` prints as
`␛[2J`), on a terminal and when piped alike. `visible()` goes further for what a person
approves: every space that is not a single one between words, every tab, newline and
invisible or confusable character is shown, and nothing is ever cut.

`SafeConsole` cleans every plain string Rich renders (prints, table cells, tree labels);
`SafeText` cleans everything put into it. The CLI builds its text only from these two
(tests/cli/test_safe.py checks that no module imports Rich's own `Text` or `Console`).
`--json` output is not text for a terminal: it stays exact JSON (see `json_line`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from rich.console import Console
from rich.style import Style
from rich.text import Text

__all__ = ["SafeConsole", "SafeText", "clean", "json_line", "visible"]

# Bidi embeddings, overrides, isolates and marks: they reorder what the eye reads.
_BIDI = frozenset(
    [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)],
)
# Letters and marks that draw nothing (fillers, blanks) or change the look of the character
# before them without being seen (variation selectors, the grapheme joiner).
_INVISIBLE = frozenset(
    [
        0x034F,
        0x115F,
        0x1160,
        0x2800,
        0x3164,
        0xFFA0,
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)
# The zero-width joiner and the emoji/text variation selectors, kept between symbols.
_EMOJI_GLUE = frozenset([0x200D, 0xFE0E, 0xFE0F])
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _codepoint(char: str) -> str:
    return f"<U+{ord(char):04X}>"


def _control(char: str) -> str | None:
    """The stand-in for a character no terminal may receive, or None if it may."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (ESC is ␛)
    if code == 0x7F:
        return "␡"
    if 0x80 <= code <= 0x9F or 0xD800 <= code <= 0xDFFF or code in _BIDI:
        return _codepoint(char)
    if code in (0x2028, 0x2029):  # line and paragraph separators: some terminals break on them
        return _codepoint(char)
    return None


_UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029"
    r"\u2066-\u2069\ud800-\udfff]"
)


def clean(value: object) -> str:
    """`value` as text that cannot drive a terminal; newlines and tabs are kept."""
    text = value if isinstance(value, str) else str(value)
    text = text.replace("\r\n", "\n")
    if _UNSAFE.search(text) is None:
        return text  # the common case: nothing to replace
    return _UNSAFE.sub(lambda match: _control(match.group()) or "", text)


def visible(value: object) -> str:
    """`value` for a person to approve: like `clean()`, and nothing that matters is invisible.

    A single space between two other characters stays a space; every other space (runs,
    leading, trailing) is `·`, a tab `→`, a newline `⏎` before the line break, a carriage
    return `␍`; other spaces, zero-width and format characters, private-use and unassigned
    code points, fillers, variation selectors and combining marks on ASCII show as
    `<U+XXXX>` (a joiner or variation selector inside an emoji sequence stays). Nothing is
    collapsed or cut.
    """
    text = value if isinstance(value, str) else str(value)
    out: list[str] = []
    last = len(text) - 1
    for index, char in enumerate(text):
        if char == " ":
            lone = 0 < index < last and text[index - 1] != " " and text[index + 1] != " "
            out.append(" " if lone else "·")
        elif char == "\t":
            out.append("→")
        elif char == "\n":
            out.append("⏎\n")
        elif char == "\r":
            out.append("␍")
        elif (stand_in := _control(char)) is not None:
            out.append(stand_in)
        elif _hidden(char, text[index - 1] if index else "", text[index + 1 : index + 2]):
            out.append(_codepoint(char))
        else:
            out.append(char)
    return "".join(out)


def _hidden(char: str, before: str, after: str) -> bool:
    code = ord(char)
    if code < 0x80:
        return False
    if code in _EMOJI_GLUE and _symbol(before) and (code != 0x200D or _symbol(after)):
        return False  # an emoji sequence (👩‍💻, ❤️) joins or styles symbols, and shows as one
    category = unicodedata.category(char)
    if category in ("Zs", "Zl", "Zp", "Cf", "Co", "Cn", "Cs") or code in _INVISIBLE:
        return True
    # A combining mark drawn onto an ASCII character disguises it ("a" + U+0301).
    return category in ("Mn", "Me") and before in _ASCII_ALNUM


def _symbol(char: str) -> bool:
    return bool(char) and unicodedata.category(char) == "So"


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def json_line(text: str) -> str:
    """JSON text ready to write: a lone surrogate (which no UTF-8 stream can carry) becomes
    its `\\uXXXX` escape, so the output is still exact JSON of the same value."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


class SafeText(Text):
    """A Rich `Text` whose content is always `clean()`: given at creation or appended."""

    def __init__(self, text: str = "", style: str | Style = "", **options: Any) -> None:
        super().__init__(clean(text), style, **options)

    def append(self, text: str | Text, style: str | Style | None = None) -> SafeText:
        super().append(clean(text) if isinstance(text, str) else text, style)
        return self

    @classmethod
    def assemble(cls, *parts: str | Text | tuple[str, str | Style], **options: Any) -> SafeText:
        text = super().assemble(*parts, **options)
        assert isinstance(text, SafeText)
        return text

    def __add__(self, other: Any) -> Text:
        return super().__add__(clean(other) if isinstance(other, str) else other)


class SafeConsole(Console):
    """A Rich console that never interprets what it prints: no markup, no emoji codes, no
    highlighting, and every plain string (a print, a table cell, a tree label) cleaned."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **options)

    def render_str(self, text: str, **options: Any) -> Text:
        options.update(markup=False, emoji=False, highlight=False)
        return super().render_str(clean(text), **options)
