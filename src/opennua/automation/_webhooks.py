"""Standard Webhooks (https://www.standardwebhooks.com): signing secrets and verification.

Verification is the reference library's (`standardwebhooks`): HMAC-SHA256 over
`{webhook-id}.{webhook-timestamp}.{body}`, any of the `v1,` signatures in
`webhook-signature`, and a timestamp within 5 minutes of now either way. What failed is
said in a short reason that never includes the payload.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRET_PREFIX = "whsec_"


class BadSignature(Exception):
    """The delivery is not from the holder of the hook's secret (or is stale): 401."""


def new_secret() -> str:
    """`whsec_` + base64 of 32 random bytes, the format senders' libraries take."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def token_secret(token: str) -> str:
    """The signing secret of an A2A push config with a token: the token's own bytes, so
    the receiver verifies the signature with the token it chose (A2A returns no secret)."""
    return SECRET_PREFIX + base64.b64encode(token.encode()).decode()


def verify(secret: str, body: bytes, headers: Mapping[str, str]) -> str:
    """Check a delivery; return its `webhook-id` or raise `BadSignature`."""
    wanted = {k: headers[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")
              if k in headers}  # fmt: skip
    try:
        Webhook(secret).verify(body, wanted, json_parse=False)
    except WebhookVerificationError as exc:
        raise BadSignature(str(exc)) from None
    except (ValueError, binascii.Error):
        # Malformed signature lists, non-UTF-8 bodies: not signed by the secret's holder.
        raise BadSignature("malformed signature headers or body") from None
    return wanted["webhook-id"]


def sign(secret: str, delivery_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers a sender attaches (for tests, benchmarks and `nua hook test`)."""
    when = datetime.fromtimestamp(timestamp, UTC)
    signature = Webhook(secret).sign(delivery_id, when, body.decode())
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }
