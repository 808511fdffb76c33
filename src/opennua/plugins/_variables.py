"""`${VAR}` and `${VAR:-default}` in `.mcp.json`, as Claude Code expands them.

The plugin root (`${PLUGIN_ROOT}`, `${CLAUDE_PLUGIN_ROOT}`) is where the server starts
(the runtime's); every other variable comes from the deployment: its `env`, and for a
stdio server the secrets the operator put into its sandbox (`sandbox_env`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
ROOT_VARIABLES = frozenset({"PLUGIN_ROOT", "CLAUDE_PLUGIN_ROOT"})


class UndefinedVariable(KeyError):
    """A `${VAR}` without a default that nothing defines: the server is unconfigured."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"${{{self.name}}} is not defined (give it with `nua deploy --env {self.name}=…`)"


def expand_variables(text: str, variables: Mapping[str, str]) -> str:
    """`text` with each `${VAR}` replaced from `variables` (the plugin root's left as they
    are, for the runtime); `${VAR:-default}` falls back to `default` when VAR is unset or
    empty, as in the shell. Raises `UndefinedVariable`."""

    def one(match: re.Match[str]) -> str:
        name, default = match[1], match[2]
        if name in ROOT_VARIABLES:
            return match[0]
        value = variables.get(name)
        if value:
            return value
        if default is not None:
            return default
        if value is not None:
            return value
        raise UndefinedVariable(name)

    return VARIABLE.sub(one, text)


def undefined_variables(texts: Iterable[str], variables: Mapping[str, str]) -> list[str]:
    """The variables `texts` use that neither `variables` nor a default defines."""
    missing: list[str] = []
    for text in texts:
        for match in VARIABLE.finditer(text):
            name = match[1]
            if name in ROOT_VARIABLES or match[2] is not None or name in variables:
                continue
            if name not in missing:
                missing.append(name)
    return missing
