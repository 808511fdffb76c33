"""API tokens: `nua.<token id>.<secret>`. The id is not secret (it names the token in
listings, logs and revocations); the 256-bit secret is shown once and stored only as its
sha256. A 256-bit random secret needs no slow hash: nothing can be guessed from it.

The owner token of a data directory from before tokens had ids is one random string; it
is kept, under the id `tok_legacy`, so an upgrade does not log anybody out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

PREFIX = "nua"
LEGACY_ID = "tok_legacy"


def mint(token_id: str) -> str:
    """A new token for `token_id` (a `tok_` id)."""
    return f"{PREFIX}.{token_id}.{secrets.token_urlsafe(32)}"


def split(token: str) -> tuple[str, str]:
    """`(token_id, secret)`; a string without our shape is the legacy owner token."""
    prefix, sep, rest = token.partition(".")
    token_id, sep2, secret = rest.partition(".")
    if prefix == PREFIX and sep and sep2 and token_id.startswith("tok_") and secret:
        return token_id, secret
    return LEGACY_ID, token


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def matches(secret: str, stored_hash: str) -> bool:
    """Constant time in the secret: an attacker learns nothing from how long it took."""
    return hmac.compare_digest(secret_hash(secret).encode(), stored_hash.encode())
