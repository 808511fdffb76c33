"""opennua: a durable runtime for long-running AI agents."""

__version__ = "0.1.0"
