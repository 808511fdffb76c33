"""`nua acp`: an ACP agent over stdio that is a thin client of a running `nua serve`.

The editor talks ACP to this process; this process talks to the Host through
`opennua.client` like any other client. It keeps nothing of its own beyond what it is
following: a session lives on the server, so the task goes on when the editor (and this
process) quits, and `session/load` in another editor replays it from the log and follows it.
"""

from __future__ import annotations

import asyncio
import contextlib
from importlib.metadata import version
from typing import Any, cast

from acp import PROTOCOL_VERSION, Agent, RequestError
from acp.agent.connection import AgentSideConnection
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    TextContentBlock,
    Usage,
)
from acp.stdio import stdio_streams

from opennua.client import (
    ApiError,
    Client,
    ClientError,
    NotFoundError,
    UnauthorizedError,
    new_intent_id,
)

from ._stdio import MAX_MESSAGE_BYTES, StdioTransport
from ._updates import Projection, Update
from ._watch import Watch

#: Our turn's end as ACP's stop reason; the others end the prompt with a JSON-RPC error.
STOP_REASONS = {"end_turn": "end_turn", "cancelled": "cancelled", "max_steps": "max_turn_requests"}
TURN_FAILED = -32603
SESSION_NOT_FOUND = -32002


class OpennuaAgent:
    """The ACP `Agent`: sessions of deployment `deployment` (None: the server's default)."""

    def __init__(
        self, client: Client, transport: StdioTransport, deployment: str | None = None
    ) -> None:
        self.client = client
        self.transport = transport
        self.deployment = deployment
        self.conn: AgentSideConnection | None = None
        self.watches: dict[str, Watch] = {}
        self.own_intents: set[str] = set()

    def on_connect(self, conn: AgentSideConnection) -> None:
        self.conn = conn

    async def close(self) -> None:
        for watch in list(self.watches.values()):
            await watch.close()
        self.watches.clear()

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=False
                ),
            ),
            agent_info=Implementation(name="opennua", title="opennua", version=version("opennua")),
        )

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        # cwd and the editor's MCP servers stay with the editor: the agent runs on the
        # server, in its session's own workspace, with the tools its deployment declares.
        async with _errors():
            session = await self.client.create_session(deployment=self.deployment)
            await self._watch(session.session_id, replay=False)
        return NewSessionResponse(session_id=session.session_id)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> LoadSessionResponse:
        old = self.watches.pop(session_id, None)
        if old is not None:
            await old.close()
        async with _errors(session_id):
            await self._watch(session_id, replay=True)
        return LoadSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        watch = self.watches.get(session_id)
        if watch is None:
            raise RequestError(
                SESSION_NOT_FOUND,
                "Session not found",
                {"sessionId": session_id, "detail": "session/new or session/load it first"},
            )
        parts = _parts(prompt)
        intent_id = new_intent_id()
        self.own_intents.add(intent_id)
        async with _errors(session_id):
            accepted = await watch.session.send_message(parts, intent_id=intent_id)
            turn = await watch.turn_end(accepted.ids["turn_id"])
        stop = str(turn.get("stop_reason"))
        if stop not in STOP_REASONS:
            raise RequestError(
                TURN_FAILED,
                f"the turn ended {stop}",
                {"stopReason": stop, "turnId": turn["turn_id"], "error": turn.get("error")},
            )
        return PromptResponse(
            stop_reason=STOP_REASONS[stop],
            usage=_usage(turn),
            field_meta={"opennua/turnId": turn["turn_id"]},
        )

    async def cancel(self, session_id: str, **_: Any) -> None:
        watch = self.watches.get(session_id)
        if watch is not None:
            with contextlib.suppress(ClientError):  # nothing running: nothing to cancel
                await watch.session.cancel()

    async def _watch(self, session_id: str, *, replay: bool) -> None:
        watch = Watch(
            self.client.session(session_id),
            Projection(self.client.url, self.own_intents),
            notify=self._notify,
            ask=self._ask,
            withdraw=self.transport.cancel_permission,
        )
        try:
            await watch.start(replay=replay)
        except BaseException:
            await watch.close()
            raise
        self.watches[session_id] = watch

    async def _notify(self, session_id: str, update: Update) -> None:
        assert self.conn is not None
        await self.conn.session_update(session_id, update)

    async def _ask(self, session_id: str, *args: Any, **meta: Any) -> Any:
        assert self.conn is not None
        return await self.conn.request_permission(session_id, *args, **meta)


def _parts(prompt: list[Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in prompt:
        if isinstance(block, TextContentBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ResourceContentBlock):
            link = {"type": "resource_link", "uri": block.uri, "name": block.name}
            parts.append(link | ({"media_type": block.mime_type} if block.mime_type else {}))
        else:
            raise RequestError.invalid_params(
                {"detail": f"{block.type} content is not supported (see promptCapabilities)"}
            )
    if not parts:
        raise RequestError.invalid_params({"detail": "the prompt is empty"})
    return parts


def _usage(turn: Any) -> Usage | None:
    usage = turn.get("usage")
    if not usage:
        return None
    inp, out = int(usage["input_tokens"]), int(usage["output_tokens"])
    return Usage(
        total_tokens=inp + out,
        input_tokens=inp,
        output_tokens=out,
        thought_tokens=usage.get("reasoning_output_tokens"),
        cached_read_tokens=usage.get("cache_read_input_tokens"),
        cached_write_tokens=usage.get("cache_creation_input_tokens"),
    )


@contextlib.asynccontextmanager
async def _errors(session_id: str | None = None) -> Any:
    """The Host's refusals as JSON-RPC errors carrying our problem `code`."""
    try:
        yield
    except NotFoundError as exc:
        data = {"code": exc.code, "detail": exc.detail, "sessionId": session_id}
        raise RequestError(SESSION_NOT_FOUND, "Session not found", data) from None
    except UnauthorizedError as exc:
        raise RequestError.auth_required({"code": exc.code, "detail": exc.detail}) from None
    except ApiError as exc:
        data = {"code": exc.code, "detail": exc.detail}
        if exc.status >= 500:
            raise RequestError.internal_error(data) from None
        raise RequestError.invalid_params(data) from None
    except ClientError as exc:
        raise RequestError.internal_error({"code": "unreachable", "detail": str(exc)}) from None


async def serve_stdio(client: Client, deployment: str | None = None) -> None:
    """Speak ACP on this process's stdin and stdout until the editor closes stdin."""
    reader, writer = await stdio_streams(limit=MAX_MESSAGE_BYTES)
    transport = StdioTransport(reader, writer)
    agent = OpennuaAgent(client, transport, deployment)
    # Not the SDK's whole `Agent` protocol: a method we do not define (authenticate,
    # session/set_mode, …) is answered -32601 by the SDK's router.
    conn = AgentSideConnection(cast(Agent, agent), transport, listening=False)
    try:
        await conn.listen()
    finally:
        await agent.close()
        await asyncio.shield(conn.close())
