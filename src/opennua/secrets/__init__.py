"""opennua.secrets: workspace-scoped named secrets, encrypted at rest (docs/secrets.md).

Values are sealed with AES-256-GCM under one server key (`NUA_SECRET_KEY` or the 0600
file `DATA/secret.key`) before they reach the store, and come out only through
`SecretStore.get`, for the gateway to inject into a remote tool call.
"""

from ._keys import KEY_ENV, KEY_FILE, SecretKey, SecretKeyError, decode_key, load_key
from ._open import open_secret_store, rotate_key
from ._store import MAX_VALUE_BYTES, NAME_PATTERN, SecretError, SecretInfo, SecretStore

__all__ = [
    "KEY_ENV",
    "KEY_FILE",
    "MAX_VALUE_BYTES",
    "NAME_PATTERN",
    "SecretError",
    "SecretInfo",
    "SecretKey",
    "SecretKeyError",
    "SecretStore",
    "decode_key",
    "load_key",
    "open_secret_store",
    "rotate_key",
]
