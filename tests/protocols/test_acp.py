"""`nua acp` as an editor runs it: a real subprocess driven by the `agent-client-protocol`
SDK's client side, against a real `nua serve` (the zero-delay scripted demo, which plans,
writes a file, asks to run a shell command, delegates to a sub-agent and publishes a report).
The Host's own state is the truth every assertion compares with."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from acp import text_block
from acp.schema import PermissionOption, ToolCallUpdate

from tests._support.polling import wait_for
from tests.e2e._proc import Server, free_port
from tests.protocols._acp_editor import editor, nua_acp_args

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

DEMO = "Write a short report"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("acp"), step_delay="0", model="scripted:demo").start()
    try:
        yield running
    finally:
        running.stop()


def _state(server: Server, sid: str) -> dict[str, Any]:
    with server.client() as http:
        state: dict[str, Any] = http.get(f"/v1/sessions/{sid}").raise_for_status().json()["state"]
    return state


def _final_text(turn: dict[str, Any]) -> str:
    """The root run's last assistant message, as the Host holds it."""
    root = [ref["id"] for ref in turn["timeline"] if ref["kind"] == "message"]
    return str(turn["messages"][root[-1]]["text"])


async def test_prompt_streams_updates_and_the_editor_approves(server: Server) -> None:
    async with editor(server, "cli_acp_prompt") as (ed, conn):
        sid = (await conn.new_session(cwd=str(server.data))).session_id
        done = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block(DEMO)]), timeout=120
        )
    assert done.stop_reason == "end_turn"
    turn = _state(server, sid)["turns"][-1]
    assert turn["stop_reason"] == "end_turn"
    # Streamed: thoughts and message chunks (deltas of a 50 ms batch arrive joined, and those
    # still batched when their message completes arrive as the completion's text), the
    # message whole and in order.
    kinds = ed.kinds()
    assert "agent_thought_chunk" in kinds and "agent_message_chunk" in kinds
    assert ed.text().endswith(_final_text(turn))
    assert "user_message_chunk" not in kinds, "the editor's own prompt is not echoed"
    # Every tool call, with its kind and its final status; the TODO plan, complete.
    calls = ed.tool_calls()
    assert set(calls) == set(turn["tool_calls"])
    for call_id, call in turn["tool_calls"].items():
        assert calls[call_id]["kind"] == call["kind"]
        assert calls[call_id]["status"] == "completed"
    assert [status for _, status in ed.plan()] == ["completed"] * 4
    # The approval was asked with our options and answered by this editor, as our intent.
    [(asked, options)] = ed.asked
    [request] = turn["input_requests"].values()
    assert asked.tool_call_id == request["tool_call_id"]
    assert [(o.option_id, o.kind) for o in options] == [
        (o["option_id"], o["kind"]) for o in request["options"]
    ]
    assert request["answered_by"]["client_id"] == "cli_acp_prompt"
    assert request["option_id"] == "allow_once"
    # The published report as a link to its bytes; usage as the Host counted it.
    [artifact] = _state(server, sid)["artifacts"].values()
    links = [
        u.content
        for u in ed.updates
        if u.session_update == "agent_message_chunk" and u.content.type == "resource_link"
    ]
    assert [(link.name, link.size) for link in links] == [("report.md", artifact["size"])]
    assert links[0].uri == f"{server.url}/v1/artifacts/{artifact['artifact_id']}/content"
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (
        turn["usage"]["input_tokens"],
        turn["usage"]["output_tokens"],
    )


def _answer(server: Server, sid: str, rid: str, option_id: str) -> httpx.Response:
    body = {"client_id": "cli_acp_other", "option_id": option_id}
    with server.client() as http:
        return http.post(f"/v1/sessions/{sid}/input-requests/{rid}/answer", json=body)


def _open_request(server: Server, sid: str) -> str:
    opened = wait_for(lambda: _state(server, sid)["open_input_requests"], timeout=60)
    return str(opened[0]["request_id"])


async def test_another_client_answers_first_and_the_dialog_is_withdrawn(server: Server) -> None:
    asked = asyncio.Event()

    async def never(_call: ToolCallUpdate, _options: list[PermissionOption]) -> str | None:
        asked.set()
        await asyncio.Event().wait()  # the person never clicks
        return None

    async with editor(server, "cli_acp_slow", never) as (ed, conn):
        sid = (await conn.new_session(cwd=str(server.data))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block(DEMO)]))
        await asyncio.wait_for(asked.wait(), 60)
        rid = _open_request(server, sid)
        assert _answer(server, sid, rid, "reject_once").status_code == 200
        done = await asyncio.wait_for(prompt, 120)
    assert done.stop_reason == "end_turn"
    request = _state(server, sid)["turns"][-1]["input_requests"][rid]
    assert request["answered_by"]["client_id"] == "cli_acp_other"
    # The editor's dialog was withdrawn by the JSON-RPC id of its permission request...
    [ask] = [m for m in ed.received if m.get("method") == "session/request_permission"]
    assert ask["params"]["_meta"]["opennua/requestId"] == rid
    cancels = [m for m in ed.received if m.get("method") == "$/cancel_request"]
    assert [c["params"]["requestId"] for c in cancels] == [ask["id"]]
    # ...and the tool call says who answered and how; it ended as the winner decided.
    notes = [
        c.content.text
        for u in ed.updates
        if u.session_update == "tool_call_update" and u.tool_call_id == request["tool_call_id"]
        for c in u.content or []
    ]
    assert "Answered elsewhere by cli_acp_other: reject_once" in notes
    assert ed.tool_calls()[request["tool_call_id"]]["status"] == "failed"


async def test_session_cancel_ends_the_prompt_cancelled(server: Server) -> None:
    sessions: list[str] = []

    async def cancel_instead(_call: ToolCallUpdate, _options: list[PermissionOption]) -> None:
        # As ACP asks of an editor: send session/cancel, answer open dialogs `cancelled`.
        assert conn_box
        await conn_box[0].cancel(session_id=sessions[0])
        return None

    conn_box: list[Any] = []
    async with editor(server, "cli_acp_cancel", cancel_instead) as (_, conn):
        conn_box.append(conn)
        sid = (await conn.new_session(cwd=str(server.data))).session_id
        sessions.append(sid)
        done = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block(DEMO)]), timeout=120
        )
    assert done.stop_reason == "cancelled"
    turn = _state(server, sid)["turns"][-1]
    assert turn["stop_reason"] == "cancelled"
    assert [c["status"] for c in turn["tool_calls"].values()].count("completed") < len(
        turn["tool_calls"]
    ), "the turn stopped before its work was done"


async def test_an_editor_quits_mid_task_and_another_loads_the_session(server: Server) -> None:
    asked = asyncio.Event()

    async def quit_instead(_call: ToolCallUpdate, _options: list[PermissionOption]) -> None:
        asked.set()
        await asyncio.Event().wait()
        return None

    async with editor(server, "cli_acp_first", quit_instead) as (first, conn):
        sid = (await conn.new_session(cwd=str(server.data))).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block(DEMO)]))
        await asyncio.wait_for(asked.wait(), 60)
        prompt.cancel()
        proc = first.proc
    # The editor is gone (stdin closed) and so is its `nua acp`; the task is not.
    assert proc is not None and proc.returncode == 0
    with pytest.raises(asyncio.CancelledError):
        await prompt
    waiting = _state(server, sid)
    assert waiting["turns"][-1]["state"] == "requires_action"
    seen_before = set(waiting["turns"][-1]["tool_calls"])

    async with editor(server, "cli_acp_second") as (second, conn):
        await asyncio.wait_for(conn.load_session(cwd=str(server.data), session_id=sid), 60)
        replayed = list(second.updates)
        ended = await asyncio.to_thread(
            wait_for, lambda: _ended(server, sid), timeout=120, interval=0.2
        )
        final = _final_text(ended["turns"][-1])
        await asyncio.to_thread(wait_for, lambda: second.text().endswith(final), timeout=30)
    # session/load replayed the log before it answered: the prompt, thoughts, each call so far.
    assert replayed[0].session_update == "user_message_chunk"
    assert replayed[0].content.text == DEMO
    assert {u.tool_call_id for u in replayed if u.session_update == "tool_call"} == seen_before
    # Then it followed live: asked the still-open question, answered it, saw the end.
    request = next(iter(ended["turns"][-1]["input_requests"].values()))
    assert request["answered_by"]["client_id"] == "cli_acp_second"
    assert ended["turns"][-1]["stop_reason"] == "end_turn"
    assert set(second.tool_calls()) == set(ended["turns"][-1]["tool_calls"])
    assert all(c["status"] == "completed" for c in second.tool_calls().values())


def _ended(server: Server, sid: str) -> dict[str, Any] | None:
    state = _state(server, sid)
    return state if state["turns"][-1]["state"] == "ended" else None


class RawEditor:
    """`nua acp` over bare pipes, for what no SDK would send."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        await self.proc.stdin.drain()

    async def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        assert line, "nua acp ended"
        message: dict[str, Any] = json.loads(line)
        return message


async def _raw(server: Server, token: str | None = None) -> RawEditor:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *nua_acp_args(server, "cli_acp_raw", token=token),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return RawEditor(proc)


async def _close(raw: RawEditor) -> int:
    assert raw.proc.stdin is not None
    raw.proc.stdin.close()
    await raw.proc.stdin.wait_closed()
    return await asyncio.wait_for(raw.proc.wait(), 30)


INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'


async def test_bad_input_gets_json_rpc_errors_never_a_crash(server: Server) -> None:
    raw = await _raw(server)
    cases: list[tuple[bytes, Any, int]] = [
        (b'{"jsonrpc":"2.0","id":2,"method":', None, -32700),  # malformed JSON
        (b"\xff\xfe not utf-8", None, -32700),
        (b"[]", None, -32600),  # a batch
        (b'{"jsonrpc":"1.0","id":3,"method":"initialize"}', 3, -32600),
        (b'{"jsonrpc":"2.0","id":[4],"method":"initialize"}', None, -32600),
        (b'{"jsonrpc":"2.0","id":5,"method":"session/fly","params":{}}', 5, -32601),
        (b'{"jsonrpc":"2.0","id":6,"method":"session/new","params":{"cwd":7}}', 6, -32602),
        (b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"ses_x",'
         b'"prompt":[{"type":"text","text":"\\ud800"}]}}', 7, -32602),  # a lone surrogate
        (b'{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"ses_x",'
         b'"prompt":[{"type":"text","text":"hi"}]}}', 8, -32002),  # never opened here
        (b'{"jsonrpc":"2.0","id":9,"method":"session/load","params":{"cwd":"/",'
         b'"sessionId":"ses_01JUNKJUNKJUNKJUNKJUNKJUNK","mcpServers":[]}}', 9, -32002),
        (b"{" + b'"x":"' + b"a" * (3 << 20) + b'"}', None, -32600),  # over 2 MiB
    ]  # fmt: skip
    for line, rpc_id, code in cases:
        await raw.send(line)
        got = await raw.reply()
        assert (got.get("id"), got["error"]["code"]) == (rpc_id, code), (line[:80], got)
    await raw.send(INIT)  # still serving, nothing crashed
    assert (await raw.reply())["result"]["protocolVersion"] == 1
    assert await _close(raw) == 0


def _someone_elses_session(server: Server) -> str:
    """A session in bob's own workspace, which the owner is no member of."""
    with server.client() as http:
        bob = http.post("/v1/users", json={"name": "bob"}).raise_for_status().json()
    auth = {"Authorization": f"Bearer {bob['token']}"}
    with httpx.Client(base_url=server.url, headers=auth) as as_bob:
        as_bob.post("/v1/workspaces", json={"name": "bobs"}).raise_for_status()
        theirs = as_bob.post("/v1/sessions", json={"title": "bob's"}).raise_for_status()
    sid: str = theirs.json()["session_id"]
    return sid


async def test_another_workspace_session_is_not_found(server: Server) -> None:
    sid = _someone_elses_session(server)
    mine = await _raw(server)
    load = (
        b'{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"cwd":"/","sessionId":"'
        + sid.encode()
        + b'","mcpServers":[]}}'
    )
    await mine.send(load)
    got = await mine.reply()
    assert got["id"] == 1 and got["error"]["code"] == -32002
    assert got["error"]["data"]["code"] == "not_found" and got["error"]["data"]["sessionId"] == sid
    assert await _close(mine) == 0


def test_nua_acp_without_a_server_exits_5(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "opennua.cli", "--url", f"http://127.0.0.1:{free_port()}",
         "--token", "x", "--data", str(tmp_path), "acp"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 5, done.stderr
    assert done.stdout == "", "stdout is the protocol's: nothing else is written there"
    assert "server unreachable" in done.stderr


def test_nua_acp_with_a_wrong_token_exits_8(server: Server, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, *nua_acp_args(server, "cli_acp_wrong", token="not-a-token")],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 8, done.stderr
    assert done.stdout == ""


def test_the_typescript_sdk_editor_has_its_dialog_withdrawn(server: Server) -> None:
    """The npm SDK implements `$/cancel_request`: its pending permission handler is aborted
    when another client answers first, and its prompt still ends with the turn."""
    events: list[dict[str, Any]] = []
    with subprocess.Popen(
        ["node", str(Path(__file__).with_name("acp_editor.mjs")), sys.executable,
         *nua_acp_args(server, "cli_acp_ts")],
        cwd=Path(__file__).parent, stdout=subprocess.PIPE, text=True,
    ) as node:  # fmt: skip
        try:
            assert node.stdout is not None
            for line in node.stdout:
                events.append(json.loads(line))
                if events[-1]["event"] == "asked":
                    sid = next(e["sessionId"] for e in events if e["event"] == "session")
                    answered = _answer(server, sid, events[-1]["requestId"], "allow_once")
                    assert answered.status_code == 200
            assert node.wait(60) == 0
        finally:
            if node.poll() is None:
                node.kill()
    kinds = [e["event"] for e in events]
    assert kinds == ["session", "asked", "withdrawn", "stop", "exit"], events
    asked, withdrawn = events[1], events[2]
    assert withdrawn["rpcId"] == asked["rpcId"] and asked["options"] == [
        "allow_once",
        "reject_once",
    ]
    assert events[3]["stopReason"] == "end_turn" and events[4]["code"] == 0
    request = _state(server, events[0]["sessionId"])["turns"][-1]["input_requests"]
    assert request[asked["requestId"]]["answered_by"]["client_id"] == "cli_acp_other"
