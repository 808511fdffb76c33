"""The A2A column: another agent drives the deployment with the official client
(`a2a-sdk`). It sees tasks, not the log: its view is `ListTasks` of the session (its
`contextId`) — each task's state, its messages, artifacts and sub-agents, usage and trace
id — and `Host` state projected the same way is what it must show. It follows each task
it starts with `SendStreamingMessage` and, after a disconnect, `SubscribeToTask`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import (
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from tests.conformance._drivers import Answered, Driver, View
from tests.conformance._host import DEMO, Loop
from tests.e2e._proc import Server

_FINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
#: What each ended turn is as a task (docs/protocols.md, "A2A": the mapping table).
_ENDED = {"end_turn": "COMPLETED", "cancelled": "CANCELED", "revoked": "AUTH_REQUIRED"}


def _state_name(turn: dict[str, Any]) -> str:
    if turn["state"] == "ended":
        return _ENDED.get(turn["stop_reason"], "FAILED")
    if turn["state"] == "requires_action" and any(
        r["status"] == "open" for r in turn["input_requests"].values()
    ):
        return "INPUT_REQUIRED"
    if turn["state"] == "queued" and not turn["attempts"]:
        return "SUBMITTED"
    return "WORKING"


def _items_of_turn(state: dict[str, Any], turn: dict[str, Any]) -> list[str]:
    out = [f"task:{turn['execution_id']}:{_state_name(turn)}"]
    for ref in turn["timeline"]:
        if ref["kind"] == "message":
            message = turn["messages"][ref["id"]]
            if message["role"] == "user" or message["status"] == "complete":
                out.append(f"message:{message['message_id']}")
    out += [
        f"artifact:{a['artifact_id']}"
        for a in state["artifacts"].values()
        if a["turn_id"] == turn["turn_id"] and a["state"] == "published"
    ]
    out += [f"worker:{w}" for w in turn["workers"]]
    return out


def _items_of_task(task: Task) -> list[str]:
    name = TaskState.Name(task.status.state).removeprefix("TASK_STATE_")
    out = [f"task:{task.id}:{name}"]
    out += [f"message:{m.message_id}" for m in task.history]
    out += [f"artifact:{a.artifact_id}" for a in task.artifacts if a.name != "output"]
    meta = MessageToDict(task.metadata).get("opennua", {})
    out += [f"worker:{w['run_id']}" for w in meta.get("workers", [])]
    return out


class A2ADriver(Driver):
    column = "A2A"
    client_id = "a2a"  # what the Host records for every A2A intent

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        self.follows: dict[str, asyncio.Task[None]] = {}

        async def make() -> tuple[httpx.AsyncClient, Client]:
            headers = {"Authorization": f"Bearer {server.token}"}
            http = httpx.AsyncClient(headers=headers, timeout=60)
            factory = ClientFactory(ClientConfig(httpx_client=http, streaming=True))
            return http, await factory.create_from_url(f"{server.url}/v1/a2a/default")

        self.http, self.client = self.loop.run(make())

    def close(self) -> None:
        for sid in list(self.follows):
            self.disconnect(sid)

        async def shut() -> None:
            await self.client.close()
            await self.http.aclose()

        self.loop.run(shut())

    @staticmethod
    def _message(text: str = "", **ids: str) -> Message:
        return Message(
            message_id=f"m-{uuid.uuid4().hex}", role=Role.ROLE_USER, parts=[Part(text=text)], **ids
        )

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        async def go() -> str:
            message = self._message(text, context_id=sid or "")
            events = self.client.send_message(SendMessageRequest(message=message))
            first = await anext(events)
            self._follow(first.task.context_id, events)
            return first.task.context_id

        return self.loop.run(go())

    def _follow(self, sid: str, events: Any) -> None:
        """Read a task's stream on until it ends (a disconnect cancels it)."""

        async def drain() -> None:
            async for _ in events:
                pass

        previous = self.follows.get(sid)
        if previous is not None and not previous.done():
            previous.cancel()
        self.follows[sid] = self.loop.loop.create_task(drain())

    async def _tasks(self, sid: str) -> list[Task]:
        found = await self.client.list_tasks(
            ListTasksRequest(context_id=sid, include_artifacts=True)
        )
        return list(reversed(found.tasks))  # newest first → in the session's order

    def view(self, sid: str) -> View:
        tasks = self.loop.run(self._tasks(sid))
        usage, traces = [], []
        for task in tasks:
            meta = MessageToDict(task.metadata).get("opennua", {})
            used = meta.get("usage", {})
            usage.append((int(used.get("input_tokens", 0)), int(used.get("output_tokens", 0))))
            traces.append(meta.get("trace_id"))
        return View(
            state=None,
            items=tuple(item for task in tasks for item in _items_of_task(task)),
            usage=tuple(usage),
            trace_ids=tuple(traces),
        )

    def expected(self, state: dict[str, Any]) -> View:
        return View(
            state=None,
            items=tuple(item for turn in state["turns"] for item in _items_of_turn(state, turn)),
            usage=tuple(
                (t["usage"]["input_tokens"], t["usage"]["output_tokens"]) for t in state["turns"]
            ),
            trace_ids=tuple(t["trace_id"] for t in state["turns"]),
        )

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        async def go() -> Answered:
            turn = next(t for t in self.host.state(sid)["turns"] if rid in t["input_requests"])
            message = self._message(task_id=turn["execution_id"], context_id=sid)
            del message.parts[:]
            data = Part()
            data.data.struct_value.update({"request_id": rid, "option_id": option_id})
            message.parts.append(data)
            request = SendMessageRequest(
                message=message, configuration=SendMessageConfiguration(return_immediately=True)
            )
            sent = await anext(self.client.send_message(request))
            answer = MessageToDict(sent.task.metadata)["opennua"]["answer"]
            return Answered(bool(answer["won"]), str(answer["answered_by"]["client_id"]))

        return self.loop.run(go())

    def disconnect(self, sid: str) -> None:
        follow = self.follows.pop(sid, None)

        async def stop() -> None:
            if follow is not None:
                follow.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follow

        self.loop.run(stop())

    def reconnect(self, sid: str) -> None:
        async def go() -> None:
            tasks = await self._tasks(sid)
            live = [t for t in tasks if t.status.state not in _FINAL]
            if live:
                self._follow(sid, self.client.subscribe(SubscribeToTaskRequest(id=live[-1].id)))

        self.loop.run(go())

    def read_artifact(self, sid: str, artifact_id: str) -> bytes:
        async def go() -> bytes:
            for task in await self._tasks(sid):
                for artifact in task.artifacts:
                    if artifact.artifact_id == artifact_id:
                        response = await self.http.get(artifact.parts[0].url)
                        response.raise_for_status()
                        return response.content
            raise AssertionError(f"no task of {sid} shows artifact {artifact_id}")

        return self.loop.run(go())
