"""The root options (`--url`, `--token`, `--data`, `--client-id`) wherever they stand.

Click takes a group's options only before its command: `nua run --url …` was "No such
option", though the unreachable-server message says to "point --url at it". The root
group moves them in front of the command before parsing, unless the command has an option
of that name itself (`nua serve --data`, `nua login --token`: those stay the command's).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

#: The root's options that take a value (the others are flags).
VALUED = frozenset({"--url", "--token", "--data", "--client-id"})


class RootGroup(TyperGroup):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist(self, ctx, args))


def hoist(group: TyperGroup, ctx: Any, args: list[str]) -> list[str]:
    """`args` with the root's valued options after the command moved before it."""
    start = 0
    while start < len(args) and args[start].startswith("-") and args[start] != "--":
        name, inline = _split(args[start])
        start += 1 if inline or name not in VALUED else 2
    command: Any = group
    end = start
    while isinstance(command, TyperGroup) and end < len(args):
        sub = command.get_command(ctx, args[end])
        if sub is None:
            return args  # Click says what is wrong with it
        command, end = sub, end + 1
    own = {opt for param in command.params for opt in param.opts}
    moved: list[str] = []
    rest: list[str] = []
    at = end
    while at < len(args):
        arg = args[at]
        if arg == "--":
            rest += args[at:]
            break
        name, inline = _split(arg)
        if name in VALUED and name not in own:
            width = 1 if inline else 2
            moved += args[at : at + width]
            at += width
            continue
        rest.append(arg)
        at += 1
    return [*args[:start], *moved, *args[start:end], *rest]


def _split(arg: str) -> tuple[str, bool]:
    name, sep, _ = arg.partition("=")
    return name, bool(sep)
