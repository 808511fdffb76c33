"""YAML front matter (`---` … `---` on top of a Markdown file), with errors on file lines."""

from __future__ import annotations

from typing import Any

import yaml

from opennua.plugins._errors import PluginError


def split_front_matter(text: str, file: str) -> tuple[dict[str, Any], str]:
    """(front matter mapping, body). The front matter is required."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").strip() != "---":
        raise PluginError(
            "missing YAML front matter (the file must start with ---)", file=file, line=1
        )
    for end in range(1, len(lines)):
        if lines[end].rstrip("\r\n").strip() == "---":
            break
    else:
        raise PluginError("front matter is not closed by a --- line", file=file, line=1)
    try:
        data = yaml.safe_load("".join(lines[1:end]))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else 2  # +1 for 1-based, +1 for the ---
        raise PluginError(
            f"malformed front matter: {exc.problem or exc}", file=file, line=line
        ) from None
    except yaml.YAMLError as exc:
        raise PluginError(f"malformed front matter: {exc}", file=file, line=2) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PluginError("front matter must be a mapping of keys to values", file=file, line=2)
    return data, "".join(lines[end + 1 :]).lstrip("\r\n")


def key_line(text: str, key: str) -> int | None:
    """The 1-based line of `key:` in the front matter, to point an error at it."""
    for no, line in enumerate(text.splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return no
    return None
