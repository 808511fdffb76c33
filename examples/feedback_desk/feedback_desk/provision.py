"""Setting the runtime up for the desk, with the `nua` CLI only: the desk's API key as a
workspace secret, the feedback plugin published and released, a deployment that reaches
the desk's MCP server with that secret by reference, and the delivery subscription."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from feedback_desk.db import Database

PLUGIN_DIR = Path(__file__).parent / "plugin"
PLUGIN = "feedback-desk"
DEPLOYMENT = "feedback-desk"
SECRET = "feedback-desk-api-key"
EVENTS = "turn.ended,input.requested,input_request.resolved,turn.state,execution.attempt_started"
#: The CLI's exit code for "already exists" (docs/cli.md).
EXISTS = 4


class ProvisionError(RuntimeError):
    pass


@dataclass(frozen=True)
class Nua:
    """The `nua` CLI against one server."""

    url: str
    token: str

    def __call__(self, *args: str, stdin: str | None = None, ok: tuple[int, ...] = (0,)) -> str:
        found = Path(sys.executable).with_name("nua")
        command = [str(found)] if found.exists() else [shutil.which("nua") or "nua"]
        env = dict(os.environ, NUA_URL=self.url, NUA_TOKEN=self.token)
        done = subprocess.run(
            [*command, *args], env=env, input=stdin, capture_output=True, text=True, timeout=120
        )
        if done.returncode not in ok:
            raise ProvisionError(f"nua {' '.join(args)}: exit {done.returncode}: {done.stderr}")
        return done.stdout


def publish(nua: Nua, version: str, plugin_dir: Path = PLUGIN_DIR) -> None:
    """Publish `plugin_dir` as `version` and release it on the stable channel."""
    nua("plugin", "publish", str(plugin_dir), "--version", version, ok=(0, EXISTS))
    nua("plugin", "release", PLUGIN, version)


def provision(nua: Nua, db: Database, desk_url: str, *, model: str, version: str = "1.0.0") -> None:
    api_key = db.setting("api_key")
    assert api_key is not None
    nua("secret", "set", SECRET, stdin=api_key + "\n")
    publish(nua, version)
    # The desk usually listens on a private address (loopback here): the gateway reaches
    # one only where the deployment lists it, an admin's decision, made here by the desk's.
    desk = urlsplit(desk_url)
    nua(
        "deploy", DEPLOYMENT, "--plugin", PLUGIN, "--model", model,
        "--tool", f"desk={desk_url}/mcp", "--credential", f"desk={SECRET}",
        "--egress", f"{_entry_host(desk.hostname or '')}:{desk.port or 80}",
    )  # fmt: skip
    if db.setting("subscription_id") is None:
        created = nua(
            "subscription", "create", f"{desk_url}/hooks/opennua",
            "--events", EVENTS, "--deployment", DEPLOYMENT,
        )  # fmt: skip
        words = created.split()
        subscription = next(w for w in words if w.startswith("sub_"))
        secret = next(w for w in words if w.startswith("whsec_"))
        db.set_setting("webhook_secret", secret)
        db.set_setting("subscription_id", subscription)


def _entry_host(host: str) -> str:
    """`host` as an egress entry names it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host
