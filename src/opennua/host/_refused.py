"""A request that breaks one of the Host's rules."""

from __future__ import annotations

from typing import Any


class Refused(Exception):
    """A request that breaks a rule; ``code`` is the problem code clients see (the server
    answers it as problem JSON, and raises its own as its subclass `Problem`)."""

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        #: More problem fields (`file`, `line` of a plugin error).
        self.extra = extra
