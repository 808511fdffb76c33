"""Where `nua login` keeps a token per server: a 0600 JSON file (`NUA_CREDENTIALS`, else
`$XDG_CONFIG_HOME/nua/credentials.json`, else `~/.config/nua/credentials.json`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from opennua._common import write_private


def credentials_path() -> Path:
    """`NUA_CREDENTIALS`, else `$XDG_CONFIG_HOME/nua/credentials.json` (~/.config/…)."""
    named = os.environ.get("NUA_CREDENTIALS")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nua" / "credentials.json"


def read_credentials() -> dict[str, Any]:
    try:
        data = json.loads(credentials_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def stored_token(url: str) -> str | None:
    entry = read_credentials().get("servers", {}).get(url.rstrip("/"))
    token = entry.get("token") if isinstance(entry, dict) else None
    return token if isinstance(token, str) and token else None


def default_server() -> str | None:
    url = read_credentials().get("default")
    return url if isinstance(url, str) and url else None


def save_credentials(url: str, token: str) -> Path:
    path = credentials_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = read_credentials()
    data.setdefault("servers", {})[url.rstrip("/")] = {"token": token}
    data["default"] = url.rstrip("/")
    write_private(path, json.dumps(data, indent=2, sort_keys=True))  # it holds tokens
    return path
