"""A2A with the official client (`a2a-sdk`) against a real `nua serve` (docs/protocols.md,
"A2A"): the card, streaming, input-required answered to completion, cancel, message ids
as idempotency keys, and the tasks' durability across a server restart — what the
SDK's in-memory task store cannot give."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
)
from google.protobuf.json_format import MessageToDict

from tests._support.polling import wait_for
from tests.conformance._host import restart
from tests.e2e._proc import Server
from tests.protocols._a2a import a2a_client, message, request

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

DEMO = "Write a short report"
S = TaskState


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # The zero-delay demo: plan, tools, an approval, a sub-agent and an artifact.
    started = Server(tmp_path_factory.mktemp("a2a"), step_delay="0", model="scripted:demo")
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _mid() -> str:
    return f"m-{uuid.uuid4().hex}"


def _state_of(event: StreamResponse) -> int | None:
    if event.HasField("task"):
        return int(event.task.status.state)
    if event.HasField("status_update"):
        return int(event.status_update.status.state)
    return None


async def _collect(events: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in events]


def _host_state(server: Server, session_id: str) -> dict[str, Any]:
    with server.client() as http:
        state: dict[str, Any] = http.get(f"/v1/sessions/{session_id}").json()["state"]
    return state


async def test_the_card_names_the_skills_the_binding_and_bearer_auth(server: Server) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as http:
        card = await A2ACardResolver(http, f"{server.url}/v1/a2a/default").get_agent_card()
        anonymous = await http.get(
            f"{server.url}/v1/a2a/default/.well-known/agent-card.json",
            headers={"Authorization": ""},
        )
        missing = await http.get(f"{server.url}/v1/a2a/nope/.well-known/agent-card.json")
    assert card.name == "default" and card.capabilities.streaming
    assert card.capabilities.push_notifications, "push configs are subscriptions"
    [interface] = card.supported_interfaces
    assert interface.url == f"{server.url}/v1/a2a/default"
    assert interface.protocol_binding == "JSONRPC" and interface.protocol_version == "1.0"
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert card.skills, "the plugin's skills (or the plugin itself) are the card's skills"
    assert anonymous.status_code == 401
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


async def test_stream_to_input_required_then_the_answer_streams_to_completion(
    server: Server,
) -> None:
    async with a2a_client(server.url, server.token) as client:
        first = await _collect(client.send_message(request(message(DEMO, _mid()))))
        task = first[0].task
        assert first[0].HasField("task") and task.status.state == S.TASK_STATE_SUBMITTED
        states = [s for s in map(_state_of, first) if s is not None]
        assert states[-1] == S.TASK_STATE_INPUT_REQUIRED, "the stream stops where input is due"
        asked = first[-1].status_update.status.message
        options = MessageToDict(asked.parts[1])["data"]["options"]
        assert {"allow_once", "reject_once"} <= {o["option_id"] for o in options}
        said = [
            e for e in first if e.HasField("status_update") and e.status_update.status.message.parts
        ]
        assert said, "the agent's messages arrive as status updates"

        answer = message("allow_once", _mid(), task_id=task.id, context_id=task.context_id)
        rest = await _collect(client.send_message(request(answer)))
        assert rest[0].task.id == task.id, "the answer continues the same task"
        assert _state_of(rest[-1]) == S.TASK_STATE_COMPLETED
        [published] = [e.artifact_update.artifact for e in rest if e.HasField("artifact_update")]

        done = await client.get_task(GetTaskRequest(id=task.id))
    assert done.status.state == S.TASK_STATE_COMPLETED
    assert done.status.message.parts[0].text, "the final answer is the status message"
    assert [a.artifact_id for a in done.artifacts] == [published.artifact_id]
    assert done.history[0].parts[0].text == DEMO
    meta = MessageToDict(done.metadata)["opennua"]
    assert meta["workers"] and meta["workers"][0]["status"] == "completed", "the sub-agent"
    # The Host is the truth: the same answer, by this client, and the same bytes.
    state = _host_state(server, task.context_id)
    [turn] = state["turns"]
    assert turn["execution_id"] == task.id and turn["stop_reason"] == "end_turn"
    [resolved] = turn["input_requests"].values()
    assert resolved["option_id"] == "allow_once"
    assert resolved["answered_by"]["client_id"] == "a2a"
    assert meta["usage"]["output_tokens"] == turn["usage"]["output_tokens"]
    link = published.parts[0].url
    async with httpx.AsyncClient() as anonymous:
        assert (await anonymous.get(link)).status_code == 401, "every download re-authorizes"
    with server.client() as http:
        data = http.get(link).content
    record = state["artifacts"][published.artifact_id]
    assert hashlib.sha256(data).hexdigest() == record["sha256"]


async def test_a_blocking_send_answers_the_task_where_it_waits(server: Server) -> None:
    async with a2a_client(server.url, server.token, streaming=False) as client:
        [event] = await _collect(client.send_message(request(message(DEMO, _mid()))))
        assert event.task.status.state == S.TASK_STATE_INPUT_REQUIRED
        listed = await client.list_tasks(ListTasksRequest(context_id=event.task.context_id))
    assert [t.id for t in listed.tasks] == [event.task.id]


async def test_a_message_id_is_the_idempotency_key(server: Server) -> None:
    mid = _mid()
    async with a2a_client(server.url, server.token, streaming=False) as client:
        [one] = await _collect(client.send_message(request(message(DEMO, mid), immediately=True)))
        [two] = await _collect(client.send_message(request(message(DEMO, mid), immediately=True)))
    assert (one.task.id, one.task.context_id) == (two.task.id, two.task.context_id)
    assert len(_host_state(server, one.task.context_id)["turns"]) == 1, "one turn, not two"


async def test_cancel_ends_a_waiting_task_and_a_second_cancel_is_refused(
    server: Server,
) -> None:
    async with a2a_client(server.url, server.token, streaming=False) as client:
        [sent] = await _collect(client.send_message(request(message(DEMO, _mid()))))
        assert sent.task.status.state == S.TASK_STATE_INPUT_REQUIRED
        await client.cancel_task(CancelTaskRequest(id=sent.task.id))

        async def canceled() -> bool:
            task = await client.get_task(GetTaskRequest(id=sent.task.id))
            return task.status.state == S.TASK_STATE_CANCELED

        # The supervisor ends it (it owns the execution), once it claims it again.
        for _ in range(600):
            if await canceled():
                break
            await asyncio.sleep(0.2)
        assert await canceled()
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=sent.task.id))
    [turn] = _host_state(server, sent.task.context_id)["turns"]
    assert turn["stop_reason"] == "cancelled"
    [request_] = turn["input_requests"].values()
    assert request_["outcome"] == "cancelled", "the question is closed with the task"


async def test_tasks_and_their_streams_survive_a_server_restart(tmp_path: Path) -> None:
    # A slow demo, so that the restart lands while the task works.
    server = Server(tmp_path, step_delay="0.4", model="scripted:demo").start()
    try:
        async with a2a_client(server.url, server.token) as client:
            events = client.send_message(request(message(DEMO, _mid())))
            first = await anext(events)
            async for event in events:
                if _state_of(event) == S.TASK_STATE_WORKING:
                    break
            await events.aclose()  # the caller goes away mid-task
        task_id, context_id = first.task.id, first.task.context_id
        restart(server)
        async with a2a_client(server.url, server.token) as client:
            again = await client.get_task(GetTaskRequest(id=task_id))
            assert again.context_id == context_id
            assert again.status.state in (S.TASK_STATE_WORKING, S.TASK_STATE_INPUT_REQUIRED)
            resumed = await _collect(client.subscribe(SubscribeToTaskRequest(id=task_id)))
            assert resumed[0].task.id == task_id
            assert _state_of(resumed[-1]) == S.TASK_STATE_INPUT_REQUIRED
            answer = message("allow_once", _mid(), task_id=task_id, context_id=context_id)
            rest = await _collect(client.send_message(request(answer)))
            assert _state_of(rest[-1]) == S.TASK_STATE_COMPLETED
        restart(server)
        async with a2a_client(server.url, server.token) as client:
            final = await client.get_task(GetTaskRequest(id=task_id))
            with pytest.raises(Exception, match="terminal"):
                await _collect(client.subscribe(SubscribeToTaskRequest(id=task_id)))
        assert final.status.state == S.TASK_STATE_COMPLETED and final.artifacts
        [turn] = _host_state(server, context_id)["turns"]
        assert turn["stop_reason"] == "end_turn"
    finally:
        server.stop()


async def test_another_workspaces_task_is_not_found(server: Server) -> None:
    with server.client() as http:
        made = http.post("/v1/users", json={"name": f"u{uuid.uuid4().hex[:8]}"})
        assert made.status_code == 201, made.text
        token = made.json()["token"]
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as http:
        assert http.post("/v1/workspaces", json={"name": "theirs"}).status_code == 201
    async with a2a_client(server.url, server.token, streaming=False) as client:
        sent = client.send_message(request(message(DEMO, _mid()), immediately=True))
        [mine] = await _collect(sent)
    wait_for(lambda: _host_state(server, mine.task.context_id)["turns"], timeout=30)
    async with a2a_client(server.url, token, streaming=False) as theirs:
        with pytest.raises(TaskNotFoundError):
            await theirs.get_task(GetTaskRequest(id=mine.task.id))
        with pytest.raises(TaskNotFoundError):
            await theirs.cancel_task(CancelTaskRequest(id=mine.task.id))
        with pytest.raises(TaskNotFoundError):
            await theirs.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=mine.task.id, url="https://example.org/")
            )
