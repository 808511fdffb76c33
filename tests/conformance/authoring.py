"""A small builder for conformance vectors: envelopes with seq, ids and times filled in.

Vectors are authored here as action lists; `regen.py` writes them as language-neutral JSON
with the expected state, which is reviewed when it changes (git diff) and checked by the
tests on every run, so the Python reducer and the files cannot drift apart.
"""

from __future__ import annotations

from typing import Any

SESSION = "ses_01JVECTOR0000000000000000"


class Log:
    def __init__(self, session_id: str = SESSION) -> None:
        self.session_id = session_id
        self.actions: list[dict[str, Any]] = []
        self._seq = 0

    def add(
        self,
        type_: str,
        data: dict[str, Any],
        *,
        turn: str | None = None,
        run: str | None = None,
        client: str | None = None,
        intent: str | None = None,
        seq: int | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        if seq is None:
            self._seq += 1
            seq = self._seq
        action = {
            "v": 1,
            "session_id": session_id or self.session_id,
            "seq": seq,
            "id": f"act_{len(self.actions) + 1:04d}",
            "type": type_,
            "ts": f"2026-11-29T08:{len(self.actions) // 60:02d}:{len(self.actions) % 60:02d}.000Z",
            "turn_id": turn,
            "run_id": run,
            "client_id": client,
            "intent_id": intent,
            "data": data,
        }
        self.actions.append(action)
        return action

    def repeat(self, index: int) -> None:
        """Deliver an already-sent action again (a duplicate after a reconnect)."""
        self.actions.append(dict(self.actions[index]))

    # -- common shapes ----------------------------------------------------------------------

    def session(self, title: str = "A session") -> None:
        self.add(
            "session.created",
            {
                "title": title,
                "workspace_id": "wsp_01",
                "principal_id": "prn_owner",
                "plugin": None,
                "deployment_digest": None,
                "metadata": {},
            },
        )

    def turn(
        self,
        turn: str,
        text: str = "Do the thing",
        *,
        kind: str = "message",
        retry_of: str | None = None,
        client: str | None = "cli_web",
        client_tools: list[dict[str, Any]] | None = None,
    ) -> None:
        data: dict[str, Any] = {
            "execution_id": "exe_" + turn[4:],
            "trigger": {"kind": kind, "principal_id": "prn_owner", "client_id": client},
            "input": [{"type": "text", "text": text}],
            "message_id": "msg_user_" + turn[4:],
            "retry_of": retry_of,
            "trace_id": "trace_" + turn[4:],
        }
        if client_tools is not None:
            data["client_tools"] = client_tools
        self.add(
            "turn.started",
            data,
            turn=turn,
            client=client,
            intent="int_" + turn[4:] if client else None,
        )

    def state(self, turn: str, state: str, attempt: int | None = None) -> None:
        self.add("turn.state", {"state": state, "attempt": attempt}, turn=turn)

    def attempt(self, turn: str, number: int, resumed: bool = False) -> None:
        self.add(
            "execution.attempt_started",
            {
                "execution_id": "exe_" + turn[4:],
                "attempt": number,
                "attempt_id": f"att_{turn[4:]}_{number}",
                "supervisor_id": f"sup_{number}",
                "resumed_from_checkpoint": resumed,
            },
            turn=turn,
        )

    def start(self, turn: str, run: str = "run_root") -> None:
        self.state(turn, "running", 1)
        self.attempt(turn, 1)

    def stream(self, turn: str, run: str, message: str, *chunks: str) -> None:
        self.add(
            "message.started", {"message_id": message, "role": "assistant"}, turn=turn, run=run
        )
        for chunk in chunks:
            self.add("message.delta", {"message_id": message, "delta": chunk}, turn=turn, run=run)
        self.add(
            "message.completed",
            {"message_id": message, "text": "".join(chunks), "status": "complete"},
            turn=turn,
            run=run,
        )

    def tool(
        self, turn: str, run: str, call: str, name: str = "read_file", kind: str = "read"
    ) -> None:
        self.add(
            "tool_call.started",
            {
                "tool_call_id": call,
                "name": name,
                "title": f"{name} {call}",
                "kind": kind,
                "input": {"path": "notes.md"},
            },
            turn=turn,
            run=run,
        )

    def tool_done(self, turn: str, run: str, call: str, output: str = "ok") -> None:
        self.add(
            "tool_call.updated",
            {"tool_call_id": call, "status": "completed", "output": output},
            turn=turn,
            run=run,
        )

    def usage(
        self, turn: str, run: str, model: str = "demo", provider: str = "scripted", n: int = 1
    ) -> None:
        self.add(
            "usage.recorded",
            {
                "provider": provider,
                "model": model,
                "input_tokens": 100 * n,
                "output_tokens": 20 * n,
                "cache_read_input_tokens": 60 * n,
                "cache_creation_input_tokens": 10 * n,
                "reasoning_output_tokens": 5 * n,
            },
            turn=turn,
            run=run,
        )

    def end(self, turn: str, reason: str = "end_turn", error: dict[str, str] | None = None) -> None:
        self.add("turn.ended", {"stop_reason": reason, "error": error}, turn=turn)
