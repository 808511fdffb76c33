"""The problems found while reading a plugin, collected rather than raised one by one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opennua.plugins._errors import PluginError, Problem, Severity


class Report:
    """The problems found so far; `checking()` turns a `PluginError` raised inside into
    findings, so one bad file does not hide the next."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        #: (severity, message) -> index in `problems`, for findings repeated across files.
        self._repeats: dict[tuple[Severity, str], tuple[int, int]] = {}

    def add(
        self, severity: Severity, message: str, file: str | None = None, line: int | None = None
    ) -> None:
        self.problems.append(Problem(severity, message, file, line))

    def once(self, severity: Severity, message: str, file: str, line: int | None) -> None:
        """One finding however many files repeat it (the first file is its location)."""
        key = (severity, message)
        if key not in self._repeats:
            self._repeats[key] = (len(self.problems), 0)
            self.add(severity, message, file, line)
            return
        index, more = self._repeats[key]
        self._repeats[key] = (index, more + 1)
        first = self.problems[index]
        also = f" (and {more + 1} more file{'s' if more else ''})"
        self.problems[index] = Problem(severity, message + also, first.file, first.line)

    @contextlib.contextmanager
    def checking(self) -> Iterator[None]:
        try:
            yield
        except PluginError as exc:
            self.problems.extend(exc.problems)

    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]
