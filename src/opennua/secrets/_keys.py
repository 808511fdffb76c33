"""The secret key: where it comes from, and how a rotation replaces the key file.

The key is 32 random bytes (AES-256-GCM), written as URL-safe base64. `NUA_SECRET_KEY`
gives it; without that variable the data directory holds it in `secret.key` (0600),
created on first use. Rotation writes the next key to `secret.key.next` *before* the
store is re-sealed and renames it over `secret.key` after, so a crash in between leaves
a key that opens the store: a start whose key is refused promotes the next file when
that one is right (`open_secret_store`).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from opennua._common import fsync_dir, write_private

KEY_ENV = "NUA_SECRET_KEY"
KEY_FILE = "secret.key"
NEXT_KEY_FILE = "secret.key.next"
KEY_BYTES = 32


class SecretKeyError(Exception):
    """The secret key is missing, malformed or not the one the store was sealed with.
    Its text is one line meant for the operator (`nua serve` prints it and exits)."""


@dataclass(frozen=True, slots=True)
class SecretKey:
    raw: bytes = b""
    #: Where it came from, for messages: `NUA_SECRET_KEY` or the key file's path.
    source: str = ""

    def __repr__(self) -> str:  # never print key material, not even in a traceback
        return f"SecretKey(source={self.source!r})"

    @staticmethod
    def generate(source: str = "generated") -> SecretKey:
        return SecretKey(secrets.token_bytes(KEY_BYTES), source)

    def encoded(self) -> str:
        return base64.urlsafe_b64encode(self.raw).decode("ascii")


def decode_key(text: str, source: str) -> SecretKey:
    try:
        raw = base64.urlsafe_b64decode(text.strip().encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raw = b""
    if len(raw) != KEY_BYTES:
        raise SecretKeyError(
            f"{source}: a secret key is {KEY_BYTES} bytes in URL-safe base64 "
            "(python -c 'import secrets,base64;"
            "print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())')"
        )
    return SecretKey(raw, source)


def load_key(data_dir: Path, env: Mapping[str, str] | None = None) -> SecretKey:
    """`NUA_SECRET_KEY`, else `DATA/secret.key` (created, 0600, when missing)."""
    environ = os.environ if env is None else env
    if environ.get(KEY_ENV):
        return decode_key(environ[KEY_ENV], KEY_ENV)
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Not replacing: another process sharing the directory may have made it first.
        write_private(path, SecretKey.generate().encoded() + "\n", replace=False)
    return decode_key(path.read_text(encoding="ascii"), str(path))


def next_key(data_dir: Path) -> SecretKey | None:
    """The key a rotation was moving to, if it stopped before renaming it into place."""
    path = data_dir / NEXT_KEY_FILE
    if not path.exists():
        return None
    return decode_key(path.read_text(encoding="ascii"), str(path))


def write_next_key(data_dir: Path, key: SecretKey) -> Path:
    path = data_dir / NEXT_KEY_FILE
    path.unlink(missing_ok=True)
    write_private(path, key.encoded() + "\n", replace=False)
    return path


def promote_next_key(data_dir: Path) -> None:
    os.replace(data_dir / NEXT_KEY_FILE, data_dir / KEY_FILE)
    fsync_dir(data_dir)


def discard_next_key(data_dir: Path) -> None:
    (data_dir / NEXT_KEY_FILE).unlink(missing_ok=True)
