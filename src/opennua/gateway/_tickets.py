"""Gateway tickets: how an attempt proves its execution to the gateway.

`gwt.<execution_id>.<secret>`: the supervisor draws the secret (256 bits) when it claims
and keeps it in memory; the store keeps only its sha256, with the attempt's epoch. The
ticket is no credential of any remote service and never leaves the supervisor except
to the gateway.
"""

from __future__ import annotations

import hashlib
import secrets

from opennua.store import GatewayStore

PREFIX = "gwt"


def mint(execution_id: str) -> tuple[str, str]:
    """A new ticket and the hash the store keeps of it."""
    secret = secrets.token_urlsafe(32)
    return f"{PREFIX}.{execution_id}.{secret}", digest(secret)


def parse(ticket: str) -> tuple[str, str] | None:
    """``(execution_id, secret)``, or None for anything not shaped like a ticket."""
    parts = ticket.split(".")
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def issue_ticket(store: GatewayStore, execution_id: str, epoch: int, now: float) -> str:
    """A ticket for the attempt at ``epoch`` of ``execution_id`` (it replaces the
    execution's earlier one). Any process on the store may issue: a supervisor needs
    neither the gateway nor the secret key for it."""
    ticket, secret_hash = mint(execution_id)
    await store.put_gateway_ticket(execution_id, epoch, secret_hash, now)
    return ticket
