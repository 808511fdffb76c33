"""One session as an editor sees it: the log followed live, as ACP updates and questions.

A `Watch` reads the session's actions through `opennua.client` (reconnecting on its own),
sends each as `session/update` notifications, wakes the prompt waiting for a turn's end,
and asks the editor about every input request that is open once it has caught up with the
log. Nothing here is a fact: the turn's end, the winner of an answer and the plan all come
from the Host's log; an answer from the editor is an intent the Host may refuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from opennua.client import (
    ActionEvent,
    ClientError,
    ConflictError,
    GoneError,
    SessionClient,
)

from ._stdio import REQUEST_META
from ._updates import Projection, Update

log = logging.getLogger("opennua.protocols.acp")

Notify = Callable[[str, Update], Awaitable[None]]
Ask = Callable[..., Awaitable[RequestPermissionResponse]]
Withdraw = Callable[[str], Awaitable[None]]


class Watch:
    """Follow `session` (from its first action, or from now: `start`) until `close()`."""

    def __init__(
        self,
        session: SessionClient,
        projection: Projection,
        *,
        notify: Notify,
        ask: Ask,
        withdraw: Withdraw,
    ) -> None:
        self.session = session
        self.projection = projection
        self._notify = notify
        self._ask = ask
        self._withdraw = withdraw
        self._caught_up = asyncio.Event()
        self._until = 0
        self._turns: dict[str, asyncio.Future[Mapping[str, Any]]] = {}
        self._asking: dict[str, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._failed: ClientError | None = None

    @property
    def session_id(self) -> str:
        return self.session.session_id

    async def start(self, *, replay: bool) -> None:
        """Replay the log (`replay`) or start from now; return once caught up with it.

        Raises the client's NotFoundError for a session the token cannot see."""
        seq, _ = await self.session.snapshot()
        self._until = seq if replay else 0
        live = self.session.subscribe(0 if replay else None, replay_gaps=True)
        await live.start()
        self._task = asyncio.create_task(self._follow(live), name=f"acp-watch-{self.session_id}")
        if not replay:
            self._caught_up.set()
            await self._ask_open()
            return
        caught_up = asyncio.create_task(self._caught_up.wait())
        await asyncio.wait({caught_up, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not self._caught_up.is_set():  # the stream failed before the replay ended
            caught_up.cancel()
            self._task.result()

    async def close(self) -> None:
        tasks = [t for t in (self._task, *self._asking.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task  # its failure was told to the prompts that waited on it
        for waiter in self._turns.values():
            waiter.cancel()

    def turn_end(self, turn_id: str) -> asyncio.Future[Mapping[str, Any]]:
        """A future for the turn's state once it ended (already done if it has)."""
        waiter = self._turns.get(turn_id)
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
            self._turns[turn_id] = waiter
            turn = self._turn(turn_id)
            if turn is not None and turn.get("state") == "ended":
                waiter.set_result(turn)
            elif self._failed is not None:
                waiter.set_exception(self._failed)
        return waiter

    def _turn(self, turn_id: str) -> Mapping[str, Any] | None:
        turns = self.session.local.state["turns"]
        return next((t for t in turns if t["turn_id"] == turn_id), None)

    async def _follow(self, live: Any) -> None:
        # The subscription rides out disconnects and restarts by itself; what ends it is
        # the Host refusing this client (a revoked token, a session gone), told to waiters.
        try:
            async with live:
                async for event in live:
                    if isinstance(event, ActionEvent):
                        await self._on_action(event.raw)
                    if not self._caught_up.is_set() and self.session.local.seq >= self._until:
                        self._caught_up.set()
                        await self._ask_open()
        except ClientError as exc:
            log.warning("stopped following %s: %s", self.session_id, exc)
            self._failed = exc
            for waiter in self._turns.values():
                if not waiter.done():
                    waiter.set_exception(exc)
            raise

    async def _on_action(self, action: Mapping[str, Any]) -> None:
        for update in self.projection.updates(action):
            await self._notify(self.session_id, update)
        kind, data = action["type"], action.get("data") or {}
        if kind == "turn.ended" and action.get("turn_id"):
            turn = self._turn(str(action["turn_id"]))
            waiter = self._turns.pop(str(action["turn_id"]), None)
            if waiter is not None and not waiter.done() and turn is not None:
                waiter.set_result(turn)
        elif kind == "input_request.opened" and self._caught_up.is_set():
            self._start_asking(data)
        elif kind == "input_request.resolved":
            await self._resolved(data)

    async def _ask_open(self) -> None:
        for open_request in self.session.local.state["open_input_requests"]:
            turn = self._turn(open_request["turn_id"])
            if turn is not None:
                self._start_asking(turn["input_requests"][open_request["request_id"]])

    def _start_asking(self, request: Mapping[str, Any]) -> None:
        rid = str(request["request_id"])
        if rid not in self._asking:
            self._asking[rid] = asyncio.create_task(self._ask_editor(request), name=f"ask-{rid}")

    async def _ask_editor(self, request: Mapping[str, Any]) -> None:
        rid = str(request["request_id"])
        options = request.get("options") or []
        call = str(request.get("tool_call_id") or rid)
        if not options:
            # ACP asks an editor to choose, never to write an answer: say where to answer.
            note = (
                f"The agent asks: {request.get('prompt', '')} — answer it from another client "
                f"(nua answer {self.session_id} {rid} --text …); ACP has no free-form answer."
            )
            await self._tell(request.get("tool_call_id"), note)
            return
        question = ToolCallUpdate(
            tool_call_id=call, title=str(request.get("prompt", "")), status="pending"
        )
        choices = [
            PermissionOption(option_id=o["option_id"], name=o["name"], kind=o["kind"])
            for o in options
        ]
        try:
            response = await self._ask(self.session_id, question, choices, **{REQUEST_META: rid})
        except (RequestError, ConnectionError):
            return  # the editor failed the request or is gone: the request stays open
        if isinstance(response.outcome, AllowedOutcome):
            with contextlib.suppress(ConflictError, GoneError):
                # Lost to another client: the log's resolution tells the editor who won.
                await self.session.answer(rid, option_id=response.outcome.option_id)
        # Dismissed (`cancelled`): the request stays open for another client to answer.

    async def _resolved(self, data: Mapping[str, Any]) -> None:
        rid = str(data["request_id"])
        task = self._asking.pop(rid, None)
        by = data.get("answered_by") or {}
        if task is None or by.get("client_id") == self.session.client.client_id:
            return  # asked nobody, or this editor's answer won
        if not task.done():  # the dialog is still open, or its answer still on its way
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self._withdraw(rid)
        who = by.get("on_behalf_of") or by.get("client_id") or "another client"
        what = data.get("option_id") or data.get("outcome")
        await self._tell(
            _call_of(self.session.local.state["turns"], rid), f"Answered elsewhere by {who}: {what}"
        )

    async def _tell(self, call: str | None, text: str) -> None:
        """A line in the tool call's content, or (a request of no call) in the chat."""
        update = self.projection.note(call, text) if call else self.projection.say(text)
        await self._notify(self.session_id, update)


def _call_of(turns: Any, rid: str) -> str | None:
    for turn in reversed(turns):
        request = turn["input_requests"].get(rid)
        if request is not None:
            return request.get("tool_call_id")  # type: ignore[no-any-return]
    return None
