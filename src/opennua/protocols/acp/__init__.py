"""ACP (Agent Client Protocol, for editors): `nua acp` speaks it over stdio as an agent and
is a thin client of a running `nua serve` (docs/protocols.md "ACP").

`serve_stdio(client, deployment)` runs until the editor closes stdin; the sessions it
started or loaded keep running on the server.
"""

from opennua.protocols.acp._agent import OpennuaAgent, serve_stdio
from opennua.protocols.acp._stdio import MAX_MESSAGE_BYTES, StdioTransport
from opennua.protocols.acp._updates import Projection

__all__ = ["MAX_MESSAGE_BYTES", "OpennuaAgent", "Projection", "StdioTransport", "serve_stdio"]
