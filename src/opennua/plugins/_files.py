"""Reading a plugin's text and JSON files, with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opennua.plugins._errors import PluginError


def read_text(root: Path, rel: str) -> str:
    try:
        return (root / rel).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PluginError(f"not UTF-8 text ({exc.reason})", file=rel) from None


def read_json(root: Path, rel: str) -> tuple[Any, str]:
    """(the value, the text it was read from: to point at a key's line)."""
    text = read_text(root, rel)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as exc:
        raise PluginError(f"malformed JSON: {exc.msg}", file=rel, line=exc.lineno) from None


def json_line(text: str, key: str) -> int | None:
    """The 1-based line where `"key"` first appears."""
    for no, line in enumerate(text.splitlines(), start=1):
        if f'"{key}"' in line:
            return no
    return None
