"""The Python client of opennua (async): observe sessions, express intents.

    async with connect(url, token) as client:
        session = await client.create_session("report")
        async with session.subscribe() as live:
            await session.send_message("Write a short report")
            state = await live.wait_for(lambda s: s["status"] == "requires_action")

Clients never decide facts (docs/architecture.md §1): the local state is built only by the shared
reducer (`opennua.protocol`) from actions the Host appended. This package imports
nothing but the protocol.
"""

from opennua.client._backoff import Backoff
from opennua.client._client import (
    DEFAULT_URL,
    Client,
    SessionClient,
    SessionPage,
    connect,
    new_client_id,
    new_intent_id,
)
from opennua.client._errors import (
    ApiError,
    ClientError,
    ConflictError,
    GoneError,
    IntegrityError,
    InvalidRequestError,
    NotFoundError,
    ServerError,
    UnauthorizedError,
    UnreachableError,
)
from opennua.client._local import LocalSession, PendingMessage, RolledBack
from opennua.client._subscription import (
    ActionEvent,
    ConnectionEvent,
    Event,
    ResyncEvent,
    Subscription,
)

__all__ = [
    "DEFAULT_URL",
    "ActionEvent",
    "ApiError",
    "Backoff",
    "Client",
    "ClientError",
    "ConflictError",
    "ConnectionEvent",
    "Event",
    "GoneError",
    "IntegrityError",
    "InvalidRequestError",
    "LocalSession",
    "NotFoundError",
    "PendingMessage",
    "ResyncEvent",
    "RolledBack",
    "ServerError",
    "SessionClient",
    "SessionPage",
    "Subscription",
    "UnauthorizedError",
    "UnreachableError",
    "connect",
    "new_client_id",
    "new_intent_id",
]
