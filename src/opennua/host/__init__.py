"""The Session Host: client-visible facts, ordered per session."""

from opennua.host._inputs import CreateSession, random_ids, rfc3339
from opennua.host._service import SessionHost
from opennua.host.hub import Frame, Hub

__all__ = ["CreateSession", "Frame", "Hub", "SessionHost", "random_ids", "rfc3339"]
