"""A2A push notifications (pure): a push config is one of our event subscriptions scoped
to a task, whose deliveries carry what A2A's push sender POSTs (the SDK's
`BasePushNotificationSender`: a `StreamResponse` as JSON, the config's token in
`X-A2A-Notification-Token`). Each push is the whole task as it stood just after the
action that changed it, rendered from the session's state (no task store)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from a2a.types import StreamResponse, TaskPushNotificationConfig
from google.protobuf.json_format import MessageToDict

from opennua.protocol.state import SessionState
from opennua.protocols.a2a._tasks import TaskFollower, find_turn, task_of

#: The subscription format whose deliveries are rendered here.
PUSH_FORMAT = "a2a"
#: The actions that can change what a task shows (its state, its agent's messages, its
#: artifacts): the ones a push config's subscription scans for.
PUSH_EVENTS = (
    "turn.started",
    "turn.state",
    "turn.ended",
    "execution.attempt_started",
    "input_request.opened",
    "input_request.resolved",
    "message.completed",
    "artifact.published",
    "artifact.updated",
)

PushStep = Callable[[SessionState, Mapping[str, Any]], str | None]


def push_step(session_id: str, execution_id: str, base_url: str, state: SessionState) -> PushStep:
    """Given the session's state where a scan starts, a step answering each following
    action (with the state just after it) with the push body it makes for the task, or
    None: a push whenever the task's stream would have an event (its status moved, its
    agent spoke, it published an artifact)."""
    follower = TaskFollower(session_id, execution_id, base_url)
    follower.first(state)

    def step(after: SessionState, action: Mapping[str, Any]) -> str | None:
        if not any(True for _ in follower.after(after, action)):
            return None
        turn = find_turn(after, execution_id)
        assert turn is not None  # the follower said something about it
        body = MessageToDict(StreamResponse(task=task_of(after, turn, base_url)))
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)

    return step


def push_config(config_id: str, task_id: str, url: str) -> TaskPushNotificationConfig:
    """A config as Get/List show it: the token is never shown back (it is a secret)."""
    return TaskPushNotificationConfig(id=config_id, task_id=task_id, url=url)
