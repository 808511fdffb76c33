"""A local Synapse for trying the bridge and for its tests (`nua bridge synapse`).

SQLite, loopback only, registration closed except through the shared secret, rate limits
raised so a bot streaming a card is not throttled by the homeserver's defaults. Needs the
`matrix` extra (`pip install 'opennua[matrix]'`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

SERVER_NAME = "localhost"

_CONFIG = """\
server_name: "{server_name}"
pid_file: "{dir}/homeserver.pid"
public_baseurl: "http://127.0.0.1:{port}/"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{dir}/homeserver.db"
media_store_path: "{dir}/media"
signing_key_path: "{dir}/signing.key"
registration_shared_secret: "{secret}"
macaroon_secret_key: "{macaroon}"
form_secret: "{form}"
report_stats: false
enable_metrics: false
trusted_key_servers: []
suppress_key_server_warning: true
presence:
  enabled: false
url_preview_enabled: false
rc_message: {{per_second: 1000, burst_count: 1000}}
rc_registration: {{per_second: 1000, burst_count: 1000}}
rc_login:
  address: {{per_second: 1000, burst_count: 1000}}
  account: {{per_second: 1000, burst_count: 1000}}
  failed_attempts: {{per_second: 1000, burst_count: 1000}}
rc_joins:
  local: {{per_second: 1000, burst_count: 1000}}
rc_invites:
  per_room: {{per_second: 1000, burst_count: 1000}}
  per_user: {{per_second: 1000, burst_count: 1000}}
"""


@dataclass(frozen=True)
class Homeserver:
    """A configured Synapse directory; `start()` runs it, `register()` makes users."""

    dir: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        return self.dir / "homeserver.yaml"

    def _secret(self) -> str:
        data = json.loads((self.dir / "secret.json").read_text())
        return str(data["registration_shared_secret"])

    @classmethod
    def prepare(cls, directory: Path, port: int) -> Homeserver:
        """Write the config and signing key into `directory` (kept if already there)."""
        directory.mkdir(parents=True, exist_ok=True)
        hs = cls(directory.resolve(), port)
        secret_file = hs.dir / "secret.json"
        if not secret_file.exists():
            secret_file.write_text(
                json.dumps({"registration_shared_secret": secrets.token_hex(16)})
            )
            secret_file.chmod(0o600)
        hs.config.write_text(
            _CONFIG.format(
                server_name=SERVER_NAME,
                dir=hs.dir,
                port=port,
                secret=hs._secret(),
                macaroon=hashlib.sha256(hs._secret().encode() + b"m").hexdigest(),
                form=hashlib.sha256(hs._secret().encode() + b"f").hexdigest(),
            )
        )
        if not (hs.dir / "signing.key").exists():
            subprocess.run(
                [*_synapse(), "-c", str(hs.config), "--generate-keys"],
                check=True,
                capture_output=True,
            )
        return hs

    def start(self, log: Path | None = None) -> subprocess.Popen[bytes]:
        """Start Synapse and wait until it answers (a minute at most)."""
        out = open(log or self.dir / "synapse.log", "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen([*_synapse(), "-c", str(self.config)], stdout=out, stderr=out)
        out.close()
        deadline = time.monotonic() + 60
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"synapse exited with {proc.returncode}; see {out.name}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                        return proc
                if time.monotonic() > deadline:
                    raise RuntimeError(f"synapse did not answer within 60 s; see {out.name}")
                time.sleep(0.2)
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM) or failed while waiting: no Synapse left behind.
            stop(proc)
            raise

    @staticmethod
    def write_token(path: Path, token: str) -> None:
        """Write an access token readable by its owner only (never a moment longer open)."""
        write_token(path, token)

    @staticmethod
    def stop(proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        stop(proc)

    def register(self, localpart: str, password: str, *, admin: bool = False) -> dict[str, str]:
        """Register `@localpart:localhost` through the shared secret; returns the login
        (`user_id`, `access_token`, `device_id`). An existing user logs in instead."""
        nonce = httpx.get(f"{self.url}/_synapse/admin/v1/register", timeout=10).json()["nonce"]
        kind = b"admin" if admin else b"notadmin"
        mac = hmac.new(self._secret().encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), localpart.encode(), password.encode(), kind]))
        body = {
            "nonce": nonce,
            "username": localpart,
            "password": password,
            "admin": admin,
            "mac": mac.hexdigest(),
        }
        response = httpx.post(f"{self.url}/_synapse/admin/v1/register", json=body, timeout=30)
        if response.status_code == 400 and response.json().get("errcode") == "M_USER_IN_USE":
            login = {
                "type": "m.login.password",
                "identifier": {"type": "m.id.user", "user": localpart},
                "password": password,
            }
            response = httpx.post(f"{self.url}/_matrix/client/v3/login", json=login, timeout=30)
        response.raise_for_status()
        data = response.json()
        return {k: data[k] for k in ("user_id", "access_token", "device_id")}


def _synapse() -> list[str]:
    return [sys.executable, "-m", "synapse.app.homeserver"]


@contextlib.contextmanager
def running(directory: Path, port: int) -> Iterator[tuple[Homeserver, subprocess.Popen[bytes]]]:
    """A prepared, started Synapse; stopped (SIGTERM, then SIGKILL) on exit."""
    hs = Homeserver.prepare(directory, port)
    proc = hs.start()
    try:
        yield hs, proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def write_token(path: Path, token: str) -> None:
    """Write an access token readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
