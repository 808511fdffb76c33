"""The ACP column: an editor (the `agent-client-protocol` SDK's client side) driving a real
`nua acp` subprocess per session. What the column shows is what the editor folds from its
`session/update` notifications: tool calls with their status and result, the agent's
messages, and the usage each prompt's response carried. An approval is the editor's
permission dialog; a disconnect is the editor quitting; a reconnect is another editor
loading the session.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
from acp import text_block
from acp.schema import PermissionOption, ToolCallUpdate

from tests._support.polling import wait_for
from tests.conformance._drivers import Answered, Driver, View, stalled
from tests.conformance._host import DEMO, Loop
from tests.e2e._proc import Server
from tests.protocols._acp_editor import Editor, editor

_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}


class _Open:
    """One editor on one session, kept open on the driver's loop."""

    def __init__(self, stack: contextlib.AsyncExitStack, ed: Editor, conn: Any) -> None:
        self.stack, self.editor, self.conn = stack, ed, conn
        self.prompts: list[asyncio.Task[Any]] = []


class AcpDriver(Driver):
    column = "ACP"
    client_id = "cli_matrix_acp"

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        self.open: dict[str, _Open] = {}
        self.dialogs: dict[str, asyncio.Future[str]] = {}  # tool call id -> option chosen
        #: session id -> turn id -> the usage its prompt's response carried
        self.usage: dict[str, dict[str, tuple[int, int]]] = {}
        self.abandoned: set[str] = set()  # turns whose editor quit before they ended

    def close(self) -> None:
        for sid in list(self.open):
            self.loop.run(self._quit(sid))

    async def _dialog(self, call: ToolCallUpdate, _options: list[PermissionOption]) -> str:
        # The person answers when the cell says so (`answer`), or never.
        future = self.dialogs.setdefault(
            call.tool_call_id, asyncio.get_running_loop().create_future()
        )
        return await future

    async def _start_editor(self) -> _Open:
        stack = contextlib.AsyncExitStack()
        ed, conn = await stack.enter_async_context(
            editor(self.server, self.client_id, self._dialog)  # type: ignore[arg-type]
        )
        return _Open(stack, ed, conn)

    async def _quit(self, sid: str) -> None:
        opened = self.open.pop(sid)
        for task in opened.prompts:
            task.cancel()
        await opened.stack.aclose()
        for task in opened.prompts:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        before = self._count(sid) if sid is not None else 0

        async def go() -> str:
            if sid is None:
                opened = await self._start_editor()
                new = await opened.conn.new_session(cwd=str(self.server.data))
                self.open[new.session_id] = opened
                session = new.session_id
            else:
                session, opened = sid, self.open[sid]
            opened.prompts.append(asyncio.create_task(self._prompt(opened, session, text)))
            return session

        found = self.loop.run(go())
        return wait_for(lambda: found if self._count(found) > before else None, timeout=60)

    def _count(self, sid: str) -> int:
        return sum(1 for t in self.host.state(sid)["turns"] if self._mine(t))

    def _mine(self, turn: dict[str, Any]) -> bool:
        return bool(turn["trigger"].get("client_id") == self.client_id)

    async def _prompt(self, opened: _Open, sid: str, text: str) -> None:
        done = await opened.conn.prompt(session_id=sid, prompt=[text_block(text)])
        turn_id = (done.field_meta or {}).get("opennua/turnId")
        if done.usage is not None and turn_id:
            got = (done.usage.input_tokens, done.usage.output_tokens)
            self.usage.setdefault(sid, {})[turn_id] = got

    def view(self, sid: str) -> View:
        ed = self.open[sid].editor
        items: list[str] = []
        seen: set[str] = set()
        messages: dict[str, str] = {}
        for u in list(ed.updates):
            if u.session_update == "tool_call" and u.tool_call_id not in seen:
                seen.add(u.tool_call_id)
                items.append(f"tool_call:{u.tool_call_id}")
            elif u.session_update == "agent_message_chunk" and u.content.type == "text":
                if u.message_id not in messages:
                    items.append(f"message:{u.message_id}")
                messages[u.message_id] = messages.get(u.message_id, "") + u.content.text
        calls = ed.tool_calls()
        results = {}
        for u in list(ed.updates):
            if u.session_update == "tool_call_update" and u.content:
                results[u.tool_call_id] = u.content[-1].content.text
        shown = [
            f"{item}:{calls[item[10:]]['status']}"
            if item.startswith("tool_call:")
            else f"{item}:{messages[item[8:]]}"
            for item in items
        ]
        shown += sorted(
            f"result:{call}:{results[call]}"
            for call, c in calls.items()
            if c["status"] == "completed" and call in results
        )
        answered = self.usage.get(sid, {})
        usage = tuple(answered[t] for t in sorted(answered))
        return View(state=None, items=tuple(shown), usage=usage, trace_ids=())

    def expected(self, state: dict[str, Any]) -> View:
        items: list[str] = []
        results: list[str] = []
        for turn in state["turns"]:
            for ref in _walk(turn, turn["timeline"], root=True):
                if ref["kind"] == "tool_call":
                    call = turn["tool_calls"][ref["id"]]
                    status = _STATUS.get(call["status"], "failed")
                    items.append(f"tool_call:{ref['id']}:{status}")
                    if status == "completed" and call["output"]:
                        results.append(f"result:{ref['id']}:{call['output']}")
                else:
                    message = turn["messages"][ref["id"]]
                    if message["role"] == "assistant" and message["text"]:
                        items.append(f"message:{ref['id']}:{message['text']}")
        usage = tuple(
            (t["usage"]["input_tokens"], t["usage"]["output_tokens"])
            for t in sorted(state["turns"], key=lambda t: t["turn_id"])
            if self._mine(t) and t["state"] == "ended" and t["turn_id"] not in self.abandoned
        )
        return View(state=None, items=(*items, *sorted(results)), usage=usage, trace_ids=())

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        call = self.host.state(sid)["turns"][-1]["input_requests"][rid]["tool_call_id"]
        wait_for(lambda: call in self.dialogs, timeout=60)
        self.loop.loop.call_soon_threadsafe(self.dialogs[call].set_result, option_id)
        ed = self.open[sid].editor

        def settled() -> dict[str, Any] | None:
            # After the answer the call moves on (runs, or fails when rejected); a loss is
            # said in the call's content before that.
            status = ed.tool_calls()[call]["status"]
            return None if status == "pending" else ed.tool_calls()[call]

        wait_for(settled, timeout=60)
        notes = [
            c.content.text
            for u in list(ed.updates)
            if u.session_update == "tool_call_update" and u.tool_call_id == call
            for c in u.content or []
            if c.content.text.startswith("Answered elsewhere by ")
        ]
        if notes:
            return Answered(False, notes[-1].removeprefix("Answered elsewhere by ").split(":")[0])
        return Answered(True, self.client_id)

    def disconnect(self, sid: str) -> None:
        state = self.host.state(sid)
        self.abandoned |= {
            t["turn_id"] for t in state["turns"] if self._mine(t) and t["state"] != "ended"
        }
        self.loop.run(self._quit(sid))

    def reconnect(self, sid: str) -> None:
        async def load() -> None:
            opened = await self._start_editor()
            await opened.conn.load_session(cwd=str(self.server.data), session_id=sid)
            self.open[sid] = opened

        self.loop.run(load())

    def read_artifact(self, sid: str, artifact_id: str) -> bytes:
        # The editor got a link to the artifact's bytes; it opens it with its token.
        links = [
            u.content.uri
            for u in self.open[sid].editor.updates
            if u.session_update == "agent_message_chunk" and u.content.type == "resource_link"
        ]
        [link] = [uri for uri in links if artifact_id in uri]
        auth = {"Authorization": f"Bearer {self.server.token}"}
        return httpx.get(link, headers=auth, timeout=30).raise_for_status().content

    @contextlib.contextmanager
    def slow(self, sid: str) -> Iterator[None]:
        # An editor whose agent process stalls: its event stream backs up and the
        # editor's prompt waits in its stdin; then it must catch up.
        with stalled(self.open[sid].editor.proc):
            yield


def _walk(
    turn: dict[str, Any], timeline: list[dict[str, str]], *, root: bool
) -> Iterator[dict[str, str]]:
    """Tool calls (a sub-agent's too) and the root run's messages, in the log's order."""
    for ref in timeline:
        if ref["kind"] == "tool_call" or (ref["kind"] == "message" and root):
            yield ref
        elif ref["kind"] == "worker":
            yield from _walk(turn, turn["workers"][ref["id"]]["timeline"], root=False)
