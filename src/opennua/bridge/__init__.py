"""Chat bridges: clients of the Session Host that live in chat rooms (docs/bridge.md).

The Matrix bridge binds a room to a session, shows each turn as a progress card edited in
place, posts input requests people answer by reply or reaction, uploads artifacts, and
keeps every outgoing event as a delivery with its own identity, state and history —
reported to the Host as `delivery.updated`. It imports only the protocol, the client
and `opennua._common`.
"""

from opennua._common import RetryPolicy
from opennua.bridge._bridge import BridgeConfig, MatrixBridge
from opennua.bridge._deliveries import delivery_id
from opennua.bridge._synapse import Homeserver
from opennua.bridge._tracing import tracer_provider_from_env

__all__ = [
    "BridgeConfig",
    "Homeserver",
    "MatrixBridge",
    "RetryPolicy",
    "delivery_id",
    "tracer_provider_from_env",
]
