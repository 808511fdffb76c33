"""The HTTP, SSE and WebSocket surface of the Session Host (docs/architecture.md §7), and the
composition root of `nua serve` (`serve(ServeConfig(...))`)."""

from opennua.server._app import create_app
from opennua.server._metrics import Metrics
from opennua.server._problems import CODES
from opennua.server._serve import ServeConfig, rotate_secret_key, serve

__all__ = ["CODES", "Metrics", "ServeConfig", "create_app", "rotate_secret_key", "serve"]
