"""YAML front matter (`---` … `---` on top of a Markdown file), with errors on file lines.

Claude Code reads front matter more leniently than a YAML parser: a value with an unquoted
`: ` (`description: Use when: the user asks…`) is accepted there. So when strict YAML
fails, the block is read again line by line as `key: value` (a warning says so); only
front matter that is not even that is an error.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from opennua.plugins._errors import PluginError, Problem

_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(.*))?")


def split_front_matter(
    text: str, file: str, problems: list[Problem] | None = None
) -> tuple[dict[str, Any], str]:
    """(front matter mapping, body). The front matter is required. With `problems`, front
    matter that is not strict YAML is read line by line and a warning appended there;
    without, it is an error."""
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
    block = lines[1:end]
    try:
        data = yaml.safe_load("".join(block))
    except yaml.YAMLError as exc:
        error = _yaml_error(exc, file)
        lenient = None if problems is None else _key_values(block)
        if lenient is None or problems is None:
            raise error from None
        problems.append(
            Problem(
                "warning",
                f"front matter is not strict YAML ({error.message}); read as `key: value` "
                "lines, as Claude Code does (quote the value to silence this)",
                file,
                error.line,
            )
        )
        data = lenient
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PluginError("front matter must be a mapping of keys to values", file=file, line=2)
    return data, "".join(lines[end + 1 :]).lstrip("\r\n")


def _yaml_error(exc: yaml.YAMLError, file: str) -> PluginError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else 2  # +1 for 1-based, +1 for the ---
        return PluginError(f"malformed front matter: {exc.problem or exc}", file=file, line=line)
    return PluginError(f"malformed front matter: {exc}", file=file, line=2)


def _key_values(block: list[str]) -> dict[str, Any] | None:
    """`key: value` lines; an indented line continues the value above it. None: a line
    that is neither (the block is not front matter in any reading)."""
    data: dict[str, Any] = {}
    key = None
    for raw in block:
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t" and key is not None:
            data[key] = f"{data[key]} {line.strip()}".strip()
            continue
        match = _KEY_LINE.fullmatch(line)
        if match is None:
            return None
        key, value = match[1], (match[2] or "").strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        data[key] = value
    return data


def key_line(text: str, key: str) -> int | None:
    """The 1-based line of `key:` in the front matter, to point an error at it."""
    for no, line in enumerate(text.splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return no
    return None
