"""How a process gets its SecretStore, and how `nua secret rotate-key` rotates."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from opennua.store import SealedSecretStore

from ._keys import (
    KEY_ENV,
    SecretKey,
    SecretKeyError,
    discard_next_key,
    load_key,
    next_key,
    promote_next_key,
    write_next_key,
)
from ._store import SecretStore


async def open_secret_store(
    store: SealedSecretStore, data_dir: Path, env: Mapping[str, str] | None = None
) -> SecretStore:
    """The key (`NUA_SECRET_KEY`, else `DATA/secret.key`) checked against the store.

    A key file the store refuses, beside a `secret.key.next` it accepts, is a rotation
    that stopped between re-sealing and renaming: the next key is moved into place.
    """
    environ = os.environ if env is None else env
    key = load_key(data_dir, environ)
    try:
        return await SecretStore.open(store, key)
    except SecretKeyError:
        pending = None if environ.get(KEY_ENV) else next_key(data_dir)
        if pending is None:
            raise
        opened = await SecretStore.open(store, pending)  # still wrong: that error
        promote_next_key(data_dir)
        return opened


async def rotate_key(
    store: SealedSecretStore,
    data_dir: Path,
    env: Mapping[str, str] | None = None,
    new_key: SecretKey | None = None,
) -> tuple[int, SecretKey]:
    """Re-seal every secret under a new key: ``(count, key)``.

    With a key file, a new key is generated and, once the store is re-sealed, replaces
    the file. With `NUA_SECRET_KEY` the caller passes ``new_key`` (the operator sets the
    variable to it afterwards); nothing is written to disk.
    """
    environ = os.environ if env is None else env
    secrets = await open_secret_store(store, data_dir, environ)
    from_env = bool(environ.get(KEY_ENV))
    if from_env and new_key is None:
        raise SecretKeyError(f"{KEY_ENV} is set: give the new key (it cannot be written there)")
    key = new_key or SecretKey.generate(str(data_dir / "secret.key"))
    if not from_env:
        write_next_key(data_dir, key)
    try:
        count = await secrets.rotate_key(key)
    except BaseException:
        if not from_env:
            discard_next_key(data_dir)
        raise
    if not from_env:
        promote_next_key(data_dir)
    return count, key
