"""RFC 6902 JSON Patch between two JSON documents: what turns the last state a client was
sent into the next one (`STATE_DELTA`). Pure.

Objects are compared key by key; arrays by index (a changed prefix is patched in place,
the tail added or removed), which is what a state that only grows or updates in place
needs; anything else is replaced. Applying the result to `old` gives `new` exactly.
"""

from __future__ import annotations

from typing import Any


def json_patch(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """The operations that turn `old` into `new` (both parsed JSON)."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            where = f"{path}/{_escape(key)}"
            if key in old:
                ops.extend(json_patch(old[key], value, where))
            else:
                ops.append({"op": "add", "path": where, "value": value})
        return ops
    if isinstance(old, list) and isinstance(new, list):
        ops = []
        common = min(len(old), len(new))
        for i in range(common):
            ops.extend(json_patch(old[i], new[i], f"{path}/{i}"))
        for i in range(common, len(new)):
            ops.append({"op": "add", "path": f"{path}/{i}", "value": new[i]})
        # From the end, so every index still names the element it meant.
        for i in reversed(range(common, len(old))):
            ops.append({"op": "remove", "path": f"{path}/{i}"})
        return ops
    # `1 == 1.0 == True` in Python; JSON tells them apart.
    if type(old) is type(new) and old == new:
        return []
    return [{"op": "replace", "path": path, "value": new}]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
