"""The one error of the plugin format: what is wrong, in which file, on which line."""

from __future__ import annotations


class PluginError(Exception):
    """A plugin directory that cannot be read or published. `file` is relative to the plugin
    directory (None: the directory itself); `line` is 1-based where the problem has one."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None):
        self.message = message
        self.file = file
        self.line = line
        where = file or "."
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")
