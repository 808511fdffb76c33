"""The Session Host: client-visible facts, ordered per session."""
