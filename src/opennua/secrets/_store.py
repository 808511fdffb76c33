"""Workspace-scoped named secrets, sealed with AES-256-GCM before they reach the store.

Each value gets its own random 96-bit nonce; the associated data is the workspace and
the name, so a sealed value moved to another row (or workspace) does not open. The store
keeps `base64(nonce || ciphertext || tag)` and the key's id (a hash of the key, which says
nothing about it). Values come out only through :meth:`SecretStore.get`, which the
gateway calls; nothing that answers a client returns one.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import hmac
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from opennua.store import KeyCheck, NotFound, SealedSecret, SealedSecretStore, WriteConflict

from ._keys import SecretKey, SecretKeyError

#: A secret's name: what deployments and the CLI use (never its value).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)
#: Large enough for any token or certificate a header carries; secrets are not files.
MAX_VALUE_BYTES = 64 * 1024
_CHECK_VALUE = b"opennua secret key check v1"
_CHECK_AD = b"opennua:key-check"
_NONCE_BYTES = 12


class SecretError(Exception):
    """A bad name or value (``code`` ``invalid_secret``) or an unknown secret
    (``secret_not_found``). The text never contains a value."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretInfo:
    """What may be shown about a secret: never its value."""

    name: str
    created_at: float
    updated_at: float
    last_used_at: float | None


def key_id(key: SecretKey) -> str:
    # A hash of 256 random bits reveals nothing about them; it names the key in the store.
    return "key_" + hashlib.sha256(b"opennua key id\0" + key.raw).hexdigest()[:16]


def check_name(name: str) -> None:
    if not _NAME.match(name):
        raise SecretError("invalid_secret", f"secret name {name!r} must match {NAME_PATTERN}")


def _ad(workspace_id: str, name: str) -> bytes:
    return f"opennua:secret\0{workspace_id}\0{name}".encode()


def _seal(key: SecretKey, plaintext: bytes, ad: bytes) -> str:
    nonce = os.urandom(_NONCE_BYTES)
    return base64.b64encode(nonce + AESGCM(key.raw).encrypt(nonce, plaintext, ad)).decode()


def _open(key: SecretKey, sealed: str, ad: bytes) -> bytes:
    blob = base64.b64decode(sealed)
    return AESGCM(key.raw).decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], ad)


def _info(s: SealedSecret) -> SecretInfo:
    return SecretInfo(
        name=s.name, created_at=s.created_at, updated_at=s.updated_at, last_used_at=s.last_used_at
    )


class SecretStore:
    """The one way to keep and read secrets. Build it with :meth:`open`, which proves
    the key right against the store before anything else runs."""

    def __init__(
        self, store: SealedSecretStore, key: SecretKey, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._key = key
        self._key_id = key_id(key)
        self._clock = clock
        self._touched: dict[tuple[str, str], float] = {}

    @classmethod
    async def open(
        cls, store: SealedSecretStore, key: SecretKey, *, clock: Callable[[], float] = time.time
    ) -> SecretStore:
        """Check ``key`` against the store (the first key ever used is recorded);
        :class:`SecretKeyError` when the store was sealed under another key."""
        secrets = cls(store, key, clock=clock)
        check = await store.get_key_check()
        if check is None:
            check = await store.init_key_check(secrets._new_check(key))
        secrets._verify(check)
        return secrets

    @property
    def key_id(self) -> str:
        return self._key_id

    def mac_key(self, purpose: str) -> bytes:
        """A key for MACs (login cookies, download links) derived from the server's secret
        key: every host sharing `NUA_SECRET_KEY` derives the same, and the sealing key
        itself never leaves this object."""
        return hmac.new(self._key.raw, f"opennua mac key: {purpose}".encode(), "sha256").digest()

    def _new_check(self, key: SecretKey) -> KeyCheck:
        return KeyCheck(
            key_id=key_id(key), sealed=_seal(key, _CHECK_VALUE, _CHECK_AD), created_at=self._clock()
        )

    def _verify(self, check: KeyCheck) -> None:
        try:
            ok = _open(self._key, check.sealed, _CHECK_AD) == _CHECK_VALUE
        except (InvalidTag, ValueError):
            ok = False
        if not ok:
            raise SecretKeyError(
                f"the secret key from {self._key.source} is not the key this store's secrets "
                f"are sealed with ({check.key_id}); set NUA_SECRET_KEY (or restore the key "
                "file) to that key"
            )

    async def put(self, workspace_id: str, name: str, value: str) -> SecretInfo:
        """Create or replace a secret (a replaced one keeps its creation time)."""
        check_name(name)
        data = value.encode("utf-8", errors="strict")
        if not data:
            raise SecretError("invalid_secret", f"secret {name}: the value is empty")
        if len(data) > MAX_VALUE_BYTES:
            raise SecretError("invalid_secret", f"secret {name}: over {MAX_VALUE_BYTES} bytes")
        now = self._clock()
        sealed = SealedSecret(
            workspace_id=workspace_id,
            name=name,
            sealed=_seal(self._key, data, _ad(workspace_id, name)),
            key_id=self._key_id,
            created_at=now,
            updated_at=now,
        )
        return _info(await self._store.put_secret(sealed))

    async def get(self, workspace_id: str, name: str, *, touch_every: float = 0.0) -> str:
        """The value, for the gateway to inject; records the use (at most once per
        ``touch_every`` seconds in this process: a hot path need not write). Internal only."""
        try:
            row = await self._store.get_secret(workspace_id, name)
        except NotFound as exc:
            raise SecretError("secret_not_found", f"no secret named {name!r}") from exc
        return await self.unseal(row, touch_every=touch_every)

    async def unseal(self, row: SealedSecret, *, touch_every: float = 0.0) -> str:
        """The value of a sealed row the caller read itself (the gateway reads its rows
        together with the facts it checks); records the use like :meth:`get`."""
        value = self._open(row)
        now = self._clock()
        key = (row.workspace_id, row.name)
        if now - self._touched.get(key, float("-inf")) >= touch_every:
            self._touched[key] = now
            await self._store.touch_secret(row.workspace_id, row.name, now)
        return value

    def _open(self, row: SealedSecret) -> str:
        if row.key_id != self._key_id:
            raise SecretKeyError(
                f"secret {row.name} is sealed under {row.key_id}, this process holds "
                f"{self._key_id}: the key was rotated, restart with the new key"
            )
        try:
            return _open(self._key, row.sealed, _ad(row.workspace_id, row.name)).decode()
        except (InvalidTag, ValueError) as exc:
            raise SecretKeyError(f"secret {row.name} does not open: it was tampered with") from exc

    async def list(self, workspace_id: str) -> builtins.list[SecretInfo]:
        return [_info(s) for s in await self._store.list_secrets(workspace_id)]

    async def delete(self, workspace_id: str, name: str) -> bool:
        return await self._store.delete_secret(workspace_id, name)

    async def missing(self, workspace_id: str, names: Sequence[str]) -> builtins.list[str]:
        """Which of ``names`` the workspace has no secret for, in the order given."""
        found = await self._store.existing_secrets(workspace_id, names)
        return [n for n in dict.fromkeys(names) if n not in found]

    async def rotate_key(self, new_key: SecretKey) -> int:
        """Re-seal every secret of every workspace under ``new_key`` in one unit; from
        then on this store uses it. Returns how many were re-sealed. Other processes that
        still hold the old key refuse to open secrets until they restart with the new one."""
        rows = await self._store.list_secrets(None)
        resealed = [
            SealedSecret(
                workspace_id=r.workspace_id,
                name=r.name,
                sealed=_seal(new_key, self._open(r).encode(), _ad(r.workspace_id, r.name)),
                key_id=key_id(new_key),
                created_at=r.created_at,
                updated_at=r.updated_at,
                last_used_at=r.last_used_at,
            )
            for r in rows
        ]
        try:
            count = await self._store.rewrap_secrets(
                self._key_id, self._new_check(new_key), resealed
            )
        except WriteConflict as exc:
            raise SecretKeyError(f"rotation refused: {exc}") from exc
        self._key, self._key_id = new_key, key_id(new_key)
        return count
