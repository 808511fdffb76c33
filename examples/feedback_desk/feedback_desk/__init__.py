"""The feedback desk: a business application built on opennua's public surfaces only
(`opennua.client`, the `nua` CLI, HTTP and delivery webhooks). See README.md."""

from feedback_desk.app import DeskConfig, create_app

__all__ = ["DeskConfig", "create_app"]
