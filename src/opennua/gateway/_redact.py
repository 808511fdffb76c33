"""Exact secret values never reach the runtime: every byte the gateway returns (bodies
and headers) has each value it injected replaced by `[redacted:<name>]`, also where a
JSON encoder escaped it, once or twice (a value with a quote, a backslash or non-ASCII
characters, inside a tool's JSON text inside the JSON-RPC answer)."""

from __future__ import annotations

import json
from collections.abc import Mapping


class Redactor:
    def __init__(self, values: Mapping[str, str]) -> None:
        pairs: dict[bytes, bytes] = {}
        for name, value in values.items():
            mark = f"[redacted:{name}]".encode()
            # Raw, JSON-escaped, and escaped twice (a tool's JSON text inside the JSON-RPC
            # answer), each as an ASCII-only and as a UTF-8 encoder writes it.
            variants = {value}
            for _ in range(2):
                variants |= {
                    json.dumps(v, ensure_ascii=a)[1:-1] for v in variants for a in (True, False)
                }
            for variant in variants:
                if variant:
                    pairs[variant.encode()] = mark
        # Longest first: a value that contains another is replaced whole.
        self._pairs = sorted(pairs.items(), key=lambda p: -len(p[0]))

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def bytes(self, data: bytes) -> bytes:
        for value, mark in self._pairs:
            if value in data:
                data = data.replace(value, mark)
        return data

    def text(self, data: str) -> str:
        return self.bytes(data.encode()).decode(errors="replace")
