"""A2A push notifications with the official client (`a2a-sdk`) against a real `nua serve`
and a real HTTP receiver (docs/protocols.md, "A2A"): a push config is a subscription
scoped to the task, so each push is signed with Standard Webhooks (the token's bytes as
the key), carries the config's token in `X-A2A-Notification-Token` and the task as A2A's
`StreamResponse`; a receiver that is down gets them retried; a deleted config gets no
more."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from a2a.client import Client
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from opennua.automation import token_secret
from tests.automation._receiver import Receiver, receiving
from tests.e2e._proc import Server
from tests.protocols._a2a import a2a_client, message, request

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]
SERVE = ("--allow-private-subscriptions", "--subscription-retry-base", "0.3")
DEMO = "Write a short report"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # Steps slow enough that a config set right after the send sees the task ask.
    started = Server(
        tmp_path_factory.mktemp("a2a-push"), step_delay="0.3", model="scripted:demo", args=SERVE
    )
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _mid() -> str:
    return f"m-{uuid.uuid4().hex}"


async def _collect(events: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in events]


async def _start(client: Client) -> Task:
    [sent] = await _collect(client.send_message(request(message(DEMO, _mid()), immediately=True)))
    return sent.task


async def _answer(client: Client, task: Task) -> None:
    answer = message("allow_once", _mid(), task_id=task.id, context_id=task.context_id)
    await _collect(client.send_message(request(answer)))


def _states(receiver: Receiver) -> list[str]:
    """The task states pushed and answered 2xx, in arrival order."""
    with receiver.lock:
        return [
            p.payload["task"]["status"]["state"] for p in receiver.posts if 200 <= p.status < 300
        ]


async def _until(check: object, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_pushes_carry_the_task_the_token_and_a_signature_in_order(server: Server) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    with receiving() as receiver:
        receiver.secret = token_secret(token)
        async with a2a_client(server.url, server.token, streaming=False) as client:
            task = await _start(client)
            config = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url=receiver.url, token=token)
            )
            assert config.id.startswith("sub_") and config.task_id == task.id
            assert config.url == receiver.url and not config.token, "a token is not shown back"
            await _until(lambda: "TASK_STATE_INPUT_REQUIRED" in _states(receiver))
            await _answer(client, task)
            await _until(lambda: "TASK_STATE_COMPLETED" in _states(receiver))
            done = await client.get_task(GetTaskRequest(id=task.id))
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=config.id)
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
        await asyncio.sleep(1.0)  # nothing more, nothing twice
    posts = list(receiver.posts)
    assert all(p.verified and p.status == 200 for p in posts), posts
    assert all(p.headers["x-a2a-notification-token"] == token for p in posts)
    assert len({p.webhook_id for p in posts}) == len(posts), "each push once"
    assert all(p.payload["task"]["id"] == task.id for p in posts)
    states = _states(receiver)
    asked, ended = states.index("TASK_STATE_INPUT_REQUIRED"), states.index("TASK_STATE_COMPLETED")
    assert asked < ended and ended == len(states) - 1, states
    assert states.count("TASK_STATE_INPUT_REQUIRED") == 1
    assert states.count("TASK_STATE_COMPLETED") == 1
    # The last push is the task as GetTask shows it (both folded from the log).
    final = posts[-1].payload["task"]
    assert final["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["artifactId"] for a in final["artifacts"]] == [a.artifact_id for a in done.artifacts]
    assert got.id == config.id and got.url == receiver.url and not got.token
    assert [c.id for c in listed.configs] == [config.id]


async def test_a_receiver_that_was_down_gets_the_pushes_retried(server: Server) -> None:
    port = _free_port()
    token = f"tok-{uuid.uuid4().hex}"
    async with a2a_client(server.url, server.token, streaming=False) as client:
        task = await _start(client)
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(
                task_id=task.id, url=f"http://127.0.0.1:{port}/a2a", token=token
            )
        )
        await asyncio.sleep(2.0)  # tries fail: nothing listens
        with receiving(port) as receiver:
            receiver.secret = token_secret(token)
            await _until(lambda: "TASK_STATE_INPUT_REQUIRED" in _states(receiver))
            await _answer(client, task)
            await _until(lambda: "TASK_STATE_COMPLETED" in _states(receiver))
            await asyncio.sleep(1.0)
    posts = list(receiver.posts)
    assert all(p.verified and p.status == 200 for p in posts), posts
    assert len({p.webhook_id for p in posts}) == len(posts), "each push once"
    assert _states(receiver).count("TASK_STATE_COMPLETED") == 1


async def test_a_deleted_config_gets_no_more_pushes(server: Server) -> None:
    with receiving() as receiver:
        receiver.secret = token_secret("t")
        async with a2a_client(server.url, server.token, streaming=False) as client:
            task = await _start(client)
            config = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url=receiver.url, token="t")
            )
            await _until(lambda: "TASK_STATE_INPUT_REQUIRED" in _states(receiver))
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=config.id)
            )
            with pytest.raises(TaskNotFoundError):
                await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task.id, id=config.id)
                )
            before = len(receiver.posts)
            await _answer(client, task)
            done = await client.get_task(GetTaskRequest(id=task.id))
            await asyncio.sleep(2.0)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(receiver.posts) == before
    assert "TASK_STATE_COMPLETED" not in _states(receiver)


async def test_bad_configs_get_the_json_rpc_error(server: Server) -> None:
    async with a2a_client(server.url, server.token, streaming=False) as client:
        task = await _start(client)
        for url in ("ftp://example.org/hook", "not a url", "http://user:pw@example.org/"):
            with pytest.raises(InvalidParamsError):
                await client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, url=url)
                )
        with pytest.raises(TaskNotFoundError):
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id="exe_nope", url="https://example.org/")
            )
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="sub_nope")
            )
