"""Download links: short-lived, single-use URLs for a browser or a chat bridge, bound to
one principal (through the token that asked for it) and one artifact.

A link is `<payload>.<mac>`: the payload (base64url JSON: token id, principal id, artifact
id, expiry, a random nonce) signed with a key derived from the server's secret key
(`secret.key` / `NUA_SECRET_KEY`) — which neither a client nor a reader of the database
ever sees — so an edited or forged link opens nothing. Revoking the token ends its links
too: `Authority` checks the token again when a link is opened. Pure: encoding and
checking; `Authority` does the reads, the re-authorization and the single use (the nonce
claimed once in the store).

The login cookie is MACed the same way (`cookie_mac`), under its own derived key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass

#: How long a link opens its artifact.
LINK_TTL = 300.0


@dataclass(frozen=True, slots=True)
class LinkClaims:
    token_id: str
    principal_id: str
    artifact_id: str
    expires_at: int
    nonce: str


def derive_key(server_key: bytes, purpose: str) -> bytes:
    """One key per use of the server's secret, so that a MAC made for one (a download
    link) is never valid as another (a login cookie)."""
    return hmac.new(server_key, f"opennua {purpose} v1".encode(), hashlib.sha256).digest()


def _mac(key: bytes, payload: str) -> str:
    return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()


def cookie_mac(key: bytes, token_id: str, expires: str) -> str:
    return _mac(key, f"{token_id}.{expires}")


def encode_link(claims: LinkClaims, key: bytes) -> str:
    body = json.dumps(
        [claims.token_id, claims.principal_id, claims.artifact_id, claims.expires_at, claims.nonce],
        separators=(",", ":"),
    )
    payload = base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")
    return f"{payload}.{_mac(key, payload)}"


def decode_link(link: str) -> tuple[LinkClaims, str] | None:
    """The claims and the payload (unverified), or None for what is not a link at all."""
    payload, _, mac = link.partition(".")
    if not payload or len(link) > 2048 or not mac:
        return None
    try:
        raw = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        token_id, principal_id, artifact_id, expires_at, nonce = raw
    except (ValueError, TypeError):
        return None
    if not all(isinstance(v, str) for v in (token_id, principal_id, artifact_id, nonce)):
        return None
    if not isinstance(expires_at, int) or isinstance(expires_at, bool):
        return None
    return LinkClaims(token_id, principal_id, artifact_id, expires_at, nonce), payload


def mac_matches(link: str, payload: str, key: bytes) -> bool:
    return hmac.compare_digest(link.partition(".")[2].encode(), _mac(key, payload).encode())
