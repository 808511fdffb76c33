"""What is wrong with a plugin: every problem found, each with a severity and a location.

`error` refuses the plugin; `warning` is published and said (Claude Code would accept it
too, or opennua runs it differently); `ignored` is a feature opennua does not run, reported
so nothing is dropped silently (docs/plugins.md, "Compatibility")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "ignored"]


@dataclass(frozen=True)
class Problem:
    """One finding. `file` is relative to the plugin directory (None: the directory
    itself); `line` is 1-based where the problem has one."""

    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        where = self.file or "."
        return where if self.line is None else f"{where}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.severity}: {self.message}"


class PluginError(Exception):
    """A plugin directory that cannot be read or published: its first error is `message`,
    `file`, `line`; `problems` holds every finding (errors, warnings, ignored) so a
    publisher fixes all of them in one pass."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        problems: Sequence[Problem] = (),
    ):
        self.message = message
        self.file = file
        self.line = line
        first = Problem("error", message, file, line)
        self.problems: tuple[Problem, ...] = tuple(problems) or (first,)
        super().__init__(f"{first.where}: {message}")
