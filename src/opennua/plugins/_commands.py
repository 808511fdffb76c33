"""Slash commands: `commands/*.md` (Claude Code's layout) as named prompts of a plugin.

A command's body is a prompt template: `$ARGUMENTS` is everything after the name, `$1`,
`$2`… its whitespace-separated words. `/name args` in a message runs it (docs/plugins.md,
"Commands"). Parsing and expansion are pure; the Host checks the name, the runtime expands.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from opennua.plugins._errors import Problem
from opennua.plugins._frontmatter import key_line

COMMANDS_DIR = "commands"
#: `/name` at the start of a message: a name as Claude Code accepts one, optionally
#: namespaced by the plugin (`/plugin:name`). `/etc/hosts …` is not one: `/` may not follow.
_INVOCATION = re.compile(r"/([A-Za-z0-9][A-Za-z0-9_.-]*(?::[A-Za-z0-9][A-Za-z0-9_.-]*)?)(?=\s|$)")
_POSITIONAL = re.compile(r"\$(ARGUMENTS|\d+)")
#: `!`git status`` lines run a command before the prompt in Claude Code; opennua does not.
_BANG = re.compile(r"!`[^`]+`")


@dataclass(frozen=True)
class Command:
    """A slash command: `commands/<name>.md` (subfolders only group them, as in Claude
    Code). `allowed_tools` as written (`Bash(git status:*)`, `Read`); None: the turn's."""

    name: str
    description: str
    body: str
    path: str
    argument_hint: str = ""
    allowed_tools: tuple[str, ...] | None = None
    model: str | None = None

    def expand(self, arguments: str) -> str:
        """The prompt the model gets for `/name arguments`. A body that never says
        `$ARGUMENTS` gets them appended, as Claude Code does."""
        words = arguments.split()

        def value(match: re.Match[str]) -> str:
            if match[1] == "ARGUMENTS":
                return arguments
            index = int(match[1])
            return words[index - 1] if 0 < index <= len(words) else ""

        body = _POSITIONAL.sub(value, self.body).strip()
        if arguments and "$ARGUMENTS" not in self.body:
            body = f"{body}\n\nARGUMENTS: {arguments}"
        return body


def parse_invocation(text: str) -> tuple[str, str] | None:
    """(name, arguments) when `text` invokes a command (`/review-pr 123`), else None. A
    `plugin:` namespace is kept in the name; `find_command` accepts both forms. `//text`
    is an escaped `/text`, no command."""
    if text.startswith("//"):
        return None
    match = _INVOCATION.match(text.lstrip("\ufeff"))
    if match is None:
        return None
    return match[1], text[match.end() :].strip()


def unknown_command(name: str, commands: tuple[Command, ...]) -> str:
    """The one message every client shows for `/name` that is no command here."""
    known = ", ".join(f"/{c.name}" for c in commands) or "none"
    return (
        f"no command /{name} in this deployment (its commands: {known}); "
        "start a message with // to send text that begins with /"
    )


def find_command(commands: tuple[Command, ...], plugin: str, name: str) -> Command | None:
    """The command `/name` or `/plugin:name` names, if the plugin has one."""
    namespace, _, bare = name.rpartition(":")
    if namespace and namespace != plugin:
        return None
    return next((c for c in commands if c.name == bare), None)


def read_commands(
    root: Path, paths: set[str], manifest: Mapping[str, Any]
) -> tuple[tuple[Command, ...], list[Problem]]:
    """The plugin's commands: `commands/**/*.md`, plus the files or folders the manifest's
    `commands` names (a path or a list of them, relative to the plugin root)."""
    problems: list[Problem] = []
    sources = [COMMANDS_DIR]
    extra = manifest.get("commands")
    if isinstance(extra, str):
        sources.append(extra)
    elif isinstance(extra, list) and all(isinstance(e, str) for e in extra):
        sources.extend(extra)
    elif extra is not None:
        problems.append(
            Problem(
                "warning",
                "commands must be a path or a list of paths; ignored",
                ".claude-plugin/plugin.json",
            )
        )
    files: list[str] = []
    for source in sources:
        rel = str(PurePosixPath(source.removeprefix("./"))).rstrip("/")
        found = [p for p in sorted(paths) if p == rel or p.startswith(f"{rel}/")]
        if not found and source != COMMANDS_DIR:
            problems.append(
                Problem(
                    "warning",
                    f"commands path {source!r} is not in the plugin",
                    ".claude-plugin/plugin.json",
                )
            )
        files += [p for p in found if p.endswith(".md") and p not in files]
    commands: dict[str, Command] = {}
    for rel in files:
        command, found_problems = _command(root, rel)
        problems += found_problems
        if command is None:
            continue
        if command.name in commands:
            problems.append(
                Problem(
                    "warning",
                    f"command /{command.name} is also {commands[command.name].path}; "
                    "this one is ignored",
                    rel,
                )
            )
            continue
        commands[command.name] = command
    return tuple(commands.values()), problems


def _command(root: Path, rel: str) -> tuple[Command | None, list[Problem]]:
    problems: list[Problem] = []
    try:
        text = (root / rel).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, [Problem("error", "not UTF-8 text", rel)]
    front, body = _front_matter(text, rel, problems)
    name = PurePosixPath(rel).stem
    if _INVOCATION.fullmatch(f"/{name}") is None or ":" in name:
        problems.append(Problem("warning", f"{name!r} cannot be typed as a command; ignored", rel))
        return None, problems
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        # Claude Code shows the body's first line instead.
        description = next((ln.strip("# ").strip() for ln in body.splitlines() if ln.strip()), "")
    hint = front.get("argument-hint", "")
    if isinstance(hint, list):  # `argument-hint: [pr-number]` reads as a YAML list
        hint = " ".join(f"[{h}]" for h in hint)
    model = front.get("model")
    if model is not None and not isinstance(model, str):
        problems.append(Problem("warning", "model must be a string; ignored", rel))
        model = None
    for line_no, line in enumerate(text.splitlines(), start=1):
        if _BANG.search(line) and line.lstrip().startswith("!"):
            problems.append(
                Problem(
                    "ignored",
                    "a !`command` line is not run before the prompt (it reaches the model as text)",
                    rel,
                    line_no,
                )
            )
            break
    return (
        Command(
            name=name,
            description=description.strip()[:1024],
            body=body,
            path=rel,
            argument_hint=str(hint),
            allowed_tools=_tools(front.get("allowed-tools"), rel, text, problems),
            model=model,
        ),
        problems,
    )


def _front_matter(text: str, rel: str, problems: list[Problem]) -> tuple[dict[str, Any], str]:
    """Front matter is optional in a command (Claude Code reads a bare Markdown file)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        problems.append(Problem("warning", "front matter is not closed by a --- line", rel, 1))
        return {}, text
    try:
        data = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError:
        # `argument-hint: [pr-number] [focus]` is no YAML, and Claude Code reads it: so
        # does this, one `key: value` a line, values as written.
        problems.append(
            Problem("warning", "front matter is not strict YAML; read as key: value lines", rel, 2)
        )
        pairs = (re.match(r"([A-Za-z][\w-]*):\s*(.*)", ln.strip()) for ln in lines[1:end])
        data = {m[1]: m[2].strip() for m in pairs if m is not None}
    return (data if isinstance(data, dict) else {}), "".join(lines[end + 1 :]).lstrip("\r\n")


def _tools(value: Any, rel: str, text: str, problems: list[Problem]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        # `Bash(git add:*), Bash(git status:*), Read`: split on commas and spaces outside
        # the parentheses.
        return tuple(t.strip() for t in re.findall(r"[^,\s(]+(?:\([^)]*\))?", value))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    problems.append(
        Problem(
            "warning",
            "allowed-tools must be a list of tool names; ignored",
            rel,
            key_line(text, "allowed-tools"),
        )
    )
    return None
