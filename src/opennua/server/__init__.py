"""The HTTP, SSE and WebSocket surface of the Session Host (DESIGN.md §7)."""

from opennua.server._app import create_app
from opennua.server._metrics import Metrics
from opennua.server._problems import CODES

__all__ = ["CODES", "Metrics", "create_app"]
