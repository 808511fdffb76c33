"""What each A2A method does with the Host: the messages it submits and the tasks it
folds from the session's log (`_a2a` is the HTTP side; the mapping is
`opennua.protocols.a2a`). Imported lazily with the SDK's types, on the first A2A call."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from opennua.automation import AutomationError, Subscriptions, SubscriptionSpec
from opennua.host import Actor, Hub, SessionHost
from opennua.protocol import (
    AnswerInput,
    Cancel,
    CreateSession,
    IntentResult,
    SendMessage,
    SequenceGap,
    action_from_dict,
    reduce,
    state_from_json,
)
from opennua.protocol.state import SessionState
from opennua.protocols import a2a
from opennua.store import NotFound, SubscriptionRecord

from ._revocations import Watched

_T = TypeVar("_T")
#: The client id every A2A intent carries: the Host records it as who answered or sent.
CLIENT_ID = "a2a"
#: ListTasks returns at most this many tasks of a context at once.
MAX_PAGE = 100
#: Host refusals that are the caller's fault in the message: an invalid-params error.
_PARAMS_CODES = frozenset({"validation_error", "idempotency_key_reused", "not_found"})


#: How an answer fared: the request, whether it won, the resolution that stands.
Answered = tuple[str, bool, dict[str, Any]]


@dataclass(frozen=True)
class Caller:
    principal_id: str
    workspace_id: str
    actor: Actor
    watch: Callable[[], contextlib.AbstractAsyncContextManager[Watched]]


def _json(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = MessageToDict(message)
    return out


def _fail(error: A2AError) -> a2a.RpcError:
    return a2a.RpcError(error)


class A2ACall:
    """One JSON-RPC call on deployment `name`, for `caller`."""

    def __init__(
        self,
        host: SessionHost,
        hub: Hub,
        caller: Caller,
        name: str,
        base_url: str,
        heartbeat: float,
        subscriptions: Subscriptions,
    ) -> None:
        self.host, self.hub, self.caller = host, hub, caller
        self.name, self.base_url, self.heartbeat = name, base_url, heartbeat
        self.subscriptions = subscriptions

    # -- the methods ---------------------------------------------------------------

    async def unary(self, rpc: a2a.Call) -> dict[str, Any] | None:
        params = rpc.params
        match rpc.method:
            case "SendMessage":
                assert isinstance(params, SendMessageRequest)
                return _json(await self._send_message(params))
            case "GetTask":
                assert isinstance(params, GetTaskRequest)
                session_id, execution_id = await self._task(params.id)
                length = params.history_length if params.HasField("history_length") else None
                _, state = await self._state(session_id)
                return _json(self._task_of(state, execution_id, length))
            case "ListTasks":
                assert isinstance(params, ListTasksRequest)
                return _json(await self._list(params))
            case "CancelTask":
                assert isinstance(params, CancelTaskRequest)
                return _json(await self._cancel(params.id))
            case "CreateTaskPushNotificationConfig":
                assert isinstance(params, TaskPushNotificationConfig)
                return _json(await self._create_push(params))
            case "GetTaskPushNotificationConfig":
                assert isinstance(params, GetTaskPushNotificationConfigRequest)
                found = await self._push(params.task_id, params.id)
                return _json(a2a.push_config(found.subscription_id, params.task_id, found.url))
            case "ListTaskPushNotificationConfigs":
                assert isinstance(params, ListTaskPushNotificationConfigsRequest)
                return _json(await self._list_push(params.task_id))
            case "DeleteTaskPushNotificationConfig":
                assert isinstance(params, DeleteTaskPushNotificationConfigRequest)
                found = await self._push(params.task_id, params.id)
                await self._automation(self.subscriptions.delete(found.subscription_id))
                return None  # the SDK's server answers a delete with a null result
            case "GetExtendedAgentCard":
                raise _fail(ExtendedAgentCardNotConfiguredError())
            case _:
                raise _fail(UnsupportedOperationError(f"{rpc.method} is not supported"))

    async def stream(
        self, rpc: a2a.Call
    ) -> tuple[StreamResponse, AsyncIterator[StreamResponse | None]]:
        """The first event (the task), and the rest as they come (None: a heartbeat)."""
        answered = None
        if rpc.method == "SendStreamingMessage":
            session_id, execution_id, answered = await self._submit(rpc.params)
        else:
            assert isinstance(rpc.params, SubscribeToTaskRequest)
            session_id, execution_id = await self._task(rpc.params.id)
        seq, state = await self._state(session_id)
        follower = a2a.TaskFollower(session_id, execution_id, self.base_url)
        first = follower.first(state)
        if first is None:
            raise _fail(TaskNotFoundError())
        if rpc.method == "SubscribeToTask" and follower.last in a2a.TERMINAL:
            raise _fail(UnsupportedOperationError("the task is in a terminal state"))
        if answered is not None:
            a2a.with_answer(first.task, *answered)
        return first, self._follow(follower, seq, state)

    # -- messages ------------------------------------------------------------------

    async def _send_message(self, request: SendMessageRequest) -> SendMessageResponse:
        session_id, execution_id, answered = await self._submit(request)
        seq, state = await self._state(session_id)
        if not request.configuration.return_immediately:
            # Blocking: the answer is the task once it is final or waits for its caller.
            follower = a2a.TaskFollower(session_id, execution_id, self.base_url)
            follower.first(state)
            if not follower.done:
                async for _ in self._follow(follower, seq, state, heartbeats=False):
                    pass
                seq, state = await self._state(session_id)
        task = self._task_of(state, execution_id, None)
        if answered is not None:
            a2a.with_answer(task, *answered)
        return SendMessageResponse(task=task)

    async def _submit(self, request: SendMessageRequest) -> tuple[str, str, Answered | None]:
        """Submit what the message asks: (session id, execution id) of its task, and for
        an answer how it fared."""
        message = request.message
        if not message.message_id:
            raise _fail(InvalidParamsError("message.messageId is required"))
        key = self._key_for(message.message_id)
        if message.task_id:
            return await self._answer(request, key)
        try:
            content = a2a.content_of(message)
        except a2a.BadMessage as exc:
            raise _fail(InvalidParamsError(str(exc))) from None
        if message.context_id:
            session_id = await self._session(message.context_id)
        else:
            text = next((p.text for p in content if p.type == "text"), "")
            create = CreateSession(
                intent_id=key("context"),
                client_id=CLIENT_ID,
                title=" ".join(text.split())[:80],
                deployment=self.name,
            )
            created = await self.host.submit(None, create, actor=self.caller.actor)
            session_id = self._accepted(created)["session_id"]
        intent = SendMessage(intent_id=key("message"), client_id=CLIENT_ID, content=content)
        sent = await self.host.submit(session_id, intent, actor=self.caller.actor)
        return session_id, self._accepted(sent)["execution_id"], None

    async def _answer(
        self, request: SendMessageRequest, key: Callable[[str], str]
    ) -> tuple[str, str, Answered | None]:
        """A message to a task that waits for input answers its open request (or the one
        a data part's `request_id` names). The Host arbitrates: the first answer wins, a
        later one is told in the task's metadata who won (also when it came so late that
        the task no longer waited)."""
        message = request.message
        session_id, execution_id = await self._task(message.task_id)
        if message.context_id and message.context_id != session_id:
            raise _fail(InvalidParamsError("contextId is not the task's"))
        _, state = await self._state(session_id)
        turn = a2a.find_turn(state, execution_id)
        assert turn is not None
        current = a2a.task_state(turn)
        if current in a2a.TERMINAL:
            raise _fail(UnsupportedOperationError("the task is in a terminal state"))
        named = a2a.named_request(message)
        target: dict[str, Any]
        if named is not None:
            if named not in turn["input_requests"]:
                raise _fail(InvalidParamsError(f"the task has no input request {named[:128]!r}"))
            target = dict(turn["input_requests"][named])
        else:
            requests = a2a.open_requests(turn)
            if current != TaskState.TASK_STATE_INPUT_REQUIRED or not requests:
                raise _fail(
                    UnsupportedOperationError(
                        "the task waits for no input: send without taskId to start another"
                    )
                )
            target = requests[0]
        try:
            answer = a2a.answer_of(message, target)
        except a2a.BadMessage as exc:
            raise _fail(InvalidParamsError(str(exc))) from None
        request_id = target["request_id"]
        intent = AnswerInput(
            intent_id=key("answer"), client_id=CLIENT_ID, request_id=request_id, **answer
        )
        result = await self.host.submit(session_id, intent, actor=self.caller.actor)
        if result.type == "conflict":
            return session_id, execution_id, (request_id, False, result.resolution)
        self._accepted(result)
        assert result.type == "accepted"
        return session_id, execution_id, (request_id, True, result.resolution or {})

    def _key_for(self, message_id: str) -> Callable[[str], str]:
        def key(purpose: str) -> str:
            return a2a.intent_key(purpose, self.caller.principal_id, self.name, message_id)

        return key

    @staticmethod
    def _accepted(result: IntentResult) -> dict[str, str]:
        if result.type == "accepted":
            return result.ids
        if result.type == "conflict":
            raise _fail(InvalidParamsError(f"{result.code}: another intent won"))
        if result.code in _PARAMS_CODES:
            raise _fail(InvalidParamsError(f"{result.code}: {result.message}"))
        if result.code == "unavailable":
            raise _fail(InternalError("the store does not answer; try again"))
        raise _fail(UnsupportedOperationError(f"{result.code}: {result.message}"))

    # -- push notifications: subscriptions scoped to the task ----------------------

    async def _create_push(self, config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
        session_id, execution_id = await self._task(config.task_id)
        if config.HasField("authentication"):
            raise _fail(InvalidParamsError("authentication is not supported: send a token instead"))
        spec = SubscriptionSpec(
            url=config.url,
            events=a2a.PUSH_EVENTS,
            session_id=session_id,
            format=a2a.PUSH_FORMAT,
            execution_id=execution_id,
            token=config.token or None,
            origin=self.base_url,
        )
        workspace, principal = self.caller.workspace_id, self.caller.principal_id
        record, _ = await self._automation(self.subscriptions.create(workspace, principal, spec))
        return a2a.push_config(record.subscription_id, config.task_id, record.url)

    async def _list_push(self, task_id: str) -> ListTaskPushNotificationConfigsResponse:
        _, execution_id = await self._task(task_id)
        found = await self._automation(self.subscriptions.in_workspace(self.caller.workspace_id))
        return ListTaskPushNotificationConfigsResponse(
            configs=[
                a2a.push_config(s.subscription_id, task_id, s.url)
                for s in found
                if s.format == a2a.PUSH_FORMAT and s.execution_id == execution_id
            ]
        )

    async def _push(self, task_id: str, config_id: str) -> SubscriptionRecord:
        """The push config `config_id` of a task this caller may see; `TaskNotFound` for
        any other (another workspace's, another task's, an admin's webhook)."""
        _, execution_id = await self._task(task_id)
        try:
            found = await self.subscriptions.get(config_id)
        except AutomationError:
            raise _fail(TaskNotFoundError("no such push notification config")) from None
        if (
            found.workspace_id != self.caller.workspace_id
            or found.format != a2a.PUSH_FORMAT
            or found.execution_id != execution_id
        ):
            raise _fail(TaskNotFoundError("no such push notification config"))
        return found

    @staticmethod
    async def _automation(work: Awaitable[_T]) -> _T:
        try:
            return await work
        except AutomationError as exc:
            if exc.code == "not_found":
                raise _fail(TaskNotFoundError(exc.detail)) from None
            if exc.code == "unavailable":
                raise _fail(PushNotificationNotSupportedError(exc.detail)) from None
            raise _fail(InvalidParamsError(exc.detail)) from None

    # -- tasks ---------------------------------------------------------------------

    async def _cancel(self, task_id: str) -> Task:
        session_id, execution_id = await self._task(task_id)
        _, state = await self._state(session_id)
        turn = a2a.find_turn(state, execution_id)
        assert turn is not None
        if a2a.task_state(turn) in a2a.TERMINAL:
            raise _fail(TaskNotCancelableError("the task is in a terminal state"))
        intent = Cancel(
            intent_id=self.host.new_intent_id(), client_id=CLIENT_ID, turn_id=turn["turn_id"]
        )
        result = await self.host.submit(session_id, intent, actor=self.caller.actor)
        if result.type == "rejected" and result.code == "turn_not_active":
            raise _fail(TaskNotCancelableError("the task is no longer active"))
        self._accepted(result)
        _, state = await self._state(session_id)
        return self._task_of(state, execution_id, None)

    async def _list(self, request: ListTasksRequest) -> ListTasksResponse:
        if not request.context_id:
            raise _fail(InvalidParamsError("name the contextId whose tasks to list"))
        session_id = await self._session(request.context_id)
        _, state = await self._state(session_id)
        length = request.history_length if request.HasField("history_length") else None
        tasks = [
            a2a.task_of(state, turn, self.base_url, history_length=length)
            for turn in reversed(state["turns"])
        ]
        if request.status:  # no presence: the zero value (unspecified) is "any"
            tasks = [t for t in tasks if t.status.state == request.status]
        size = min(request.page_size or 50, MAX_PAGE) if request.HasField("page_size") else 50
        page = tasks[:size]
        if not request.include_artifacts:
            for task in page:
                del task.artifacts[:]
        return ListTasksResponse(tasks=page, page_size=size, total_size=len(tasks))

    async def _task(self, task_id: str) -> tuple[str, str]:
        """(session id, execution id) of a task this caller may see on this deployment;
        `TaskNotFound` for any other (another workspace's exists no more than a typo)."""
        if not task_id:
            raise _fail(InvalidParamsError("the task id is required"))
        try:
            execution, _ = await self.host.execution(task_id)
        except NotFound:
            raise _fail(TaskNotFoundError()) from None
        await self._session(execution.session_id, missing=TaskNotFoundError())
        return execution.session_id, execution.execution_id

    async def _session(self, session_id: str, missing: A2AError | None = None) -> str:
        try:
            session = await self.host.session(session_id)
        except NotFound:
            session = None
        if (
            session is None
            or session.workspace_id != self.caller.workspace_id
            or session.deployment != self.name
        ):
            raise _fail(missing or InvalidParamsError(f"no context {session_id[:128]!r} here"))
        return session_id

    async def _state(self, session_id: str) -> tuple[int, SessionState]:
        """A state of our own to fold into (the Host's cached one is shared)."""
        seq, text = await self.host.snapshot_json(session_id)
        return seq, state_from_json(text)

    def _task_of(self, state: SessionState, execution_id: str, length: int | None) -> Task:
        turn = a2a.find_turn(state, execution_id)
        if turn is None:
            raise _fail(TaskNotFoundError())
        return a2a.task_of(state, turn, self.base_url, history_length=length)

    async def _follow(
        self,
        follower: a2a.TaskFollower,
        seq: int,
        state: SessionState,
        *,
        heartbeats: bool = True,
    ) -> AsyncIterator[StreamResponse | None]:
        """The task's events from the log after `seq`, until it is final or waits for
        its caller; a `resync` (this reader fell behind) starts again from a snapshot."""
        session_id = follower.session_id
        async with self.caller.watch() as watched:
            while not follower.done:
                async with self.hub.subscribe(session_id, seq) as subscription:
                    watched.attach(subscription)
                    async for batch in subscription.batches(self.heartbeat):
                        if not batch and heartbeats:
                            yield None
                        for frame in batch:
                            if frame.kind == "resync":
                                break
                            action = json.loads(frame.json)
                            try:
                                state = reduce(state, action_from_dict(action))
                            except SequenceGap:
                                break
                            seq = frame.seq
                            for event in follower.after(state, action):
                                yield event
                            if follower.done:
                                return
                        else:
                            continue
                        break  # resync: a fresh snapshot, then on from there
                if watched.denied is not None:
                    return
                seq, state = await self._state(session_id)
                for event in follower.resumed(state):
                    yield event
