"""The conformance vectors' action lists, one function each (name = file name)."""

from __future__ import annotations

from collections.abc import Callable

from tests.conformance.authoring import SESSION, Log

T1, T2, R, W, W2 = "trn_01", "trn_02", "run_root", "run_worker", "run_worker2"
VECTORS: dict[str, tuple[str, Callable[[], Log]]] = {}


def vector(description: str) -> Callable[[Callable[[], Log]], Callable[[], Log]]:
    def register(build: Callable[[], Log]) -> Callable[[], Log]:
        VECTORS[build.__name__] = (description, build)
        return build

    return register


def _approval(log: Log, request: str = "req_01", call: str = "call_shell") -> None:
    log.tool(T1, R, call, name="shell", kind="execute")
    log.add(
        "input_request.opened",
        {
            "request_id": request,
            "reason": "tool_call",
            "tool_call_id": call,
            "prompt": "Run `ls -la`?",
            "options": [
                {"option_id": "allow", "name": "Allow once", "kind": "allow_once"},
                {"option_id": "reject", "name": "Reject", "kind": "reject_once"},
            ],
        },
        turn=T1,
        run=R,
    )
    log.state(T1, "requires_action")


@vector("session.created sets identity, title and creation time")
def session_created() -> Log:
    log = Log()
    log.session("Quarterly report")
    return log


@vector("session.created carries the execution snapshot: plugin@version, digests, model")
def session_snapshot() -> Log:
    log = Log()
    log.add(
        "session.created",
        {
            "title": "Support",
            "principal_id": "prn_owner",
            "plugin": {"name": "helper", "version": "1.2.0", "digest": "sha256:" + "1" * 64},
            "deployment": "support",
            "deployment_digest": "sha256:" + "2" * 64,
            "model": "anthropic:claude-sonnet-4-5",
            "snapshot_digest": "sha256:" + "3" * 64,
            "metadata": {},
        },
    )
    return log


@vector("session.updated changes the title and replaces metadata; absent fields stay")
def session_updated() -> Log:
    log = Log()
    log.session()
    log.add("session.updated", {"title": "Renamed", "metadata": {"tag": "q3", "n": 2}})
    log.add("session.updated", {"metadata": {"tag": "q4"}})
    return log


@vector("a simple turn: queued, running, streamed answer, usage, ended")
def turn_simple() -> Log:
    log = Log()
    log.session()
    log.turn(T1, "Hello")
    log.start(T1)
    log.stream(T1, R, "msg_a1", "Hi", " there", "!")
    log.usage(T1, R)
    log.end(T1)
    return log


@vector(
    "a turn as the runtime logs it now: queued from turn.started, running from each"
    " attempt_started (no turn.state for either), requires_action, running again, ended"
)
def turn_states_from_facts() -> Log:
    log = Log()
    log.session()
    log.turn(T1, "Hello")
    log.attempt(T1, 1)
    log.state(T1, "requires_action")
    log.attempt(T1, 2, resumed=True)
    log.stream(T1, R, "msg_a1", "Done")
    log.end(T1)
    return log


@vector("message.added records a whole assistant message with its content parts")
def message_added() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add(
        "message.added",
        {
            "message_id": "msg_a1",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "See "},
                {"type": "resource_link", "uri": "file:///report.md", "name": "report.md"},
                {"type": "text", "text": "the report."},
            ],
        },
        turn=T1,
        run=R,
    )
    log.end(T1)
    return log


@vector("reasoning streams in deltas, completes, and precedes the answer in the timeline")
def reasoning_streamed() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    for chunk in ("Let me ", "think ", "about it."):
        log.add("reasoning.delta", {"message_id": "msg_a1", "delta": chunk}, turn=T1, run=R)
    log.add(
        "reasoning.completed",
        {"message_id": "msg_a1", "text": "Let me think about it."},
        turn=T1,
        run=R,
    )
    log.stream(T1, R, "msg_a1", "Done.")
    log.end(T1)
    return log


@vector("reasoning.completed without deltas creates a complete reasoning item")
def reasoning_completed_only() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add("reasoning.completed", {"message_id": "msg_a1", "text": "Short."}, turn=T1, run=R)
    log.end(T1)
    return log


@vector("tool call: pending, in progress, completed with output")
def tool_call_lifecycle() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.tool(T1, R, "call_01")
    log.add(
        "tool_call.updated", {"tool_call_id": "call_01", "status": "in_progress"}, turn=T1, run=R
    )
    log.tool_done(T1, R, "call_01", "# Notes\n")
    log.end(T1)
    return log


@vector("a failed tool call keeps its error; a later update without output keeps the output")
def tool_call_failed() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.tool(T1, R, "call_01", name="write_file", kind="edit")
    log.add(
        "tool_call.updated",
        {
            "tool_call_id": "call_01",
            "status": "failed",
            "output": "partial",
            "error": {"code": "invalid_arguments", "message": "path is required"},
        },
        turn=T1,
        run=R,
    )
    log.add("tool_call.updated", {"tool_call_id": "call_01", "status": "failed"}, turn=T1, run=R)
    log.end(T1, "failed", {"code": "tool_failed", "message": "write_file failed"})
    return log


@vector("a large tool output goes by reference with an inline preview")
def tool_call_output_ref() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.tool(T1, R, "call_01", name="shell", kind="execute")
    log.add(
        "tool_call.updated",
        {
            "tool_call_id": "call_01",
            "status": "completed",
            "output": "line 1\nline 2\n…",
            "output_ref": "blob:sha256:" + "ab" * 32,
        },
        turn=T1,
        run=R,
    )
    log.end(T1)
    return log


@vector("HITL: approval requested, the turn waits, one answer resolves it, the tool runs")
def hitl_resolved() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _approval(log)
    log.add(
        "input_request.resolved",
        {
            "request_id": "req_01",
            "outcome": "selected",
            "option_id": "allow",
            "answered_by": {"client_id": "cli_phone", "principal_id": "prn_owner"},
        },
        turn=T1,
        client="cli_phone",
        intent="int_answer",
    )
    log.state(T1, "running")
    log.tool_done(T1, R, "call_shell", "total 0")
    log.end(T1)
    return log


@vector("HITL: the approval is rejected; the tool call ends rejected and the turn goes on")
def hitl_rejected() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _approval(log)
    log.add(
        "input_request.resolved",
        {
            "request_id": "req_01",
            "outcome": "selected",
            "option_id": "reject",
            "answered_by": {"client_id": "cli_phone", "principal_id": "prn_owner"},
        },
        turn=T1,
        client="cli_phone",
        intent="int_answer",
    )
    log.state(T1, "running")
    log.add(
        "tool_call.updated",
        {
            "tool_call_id": "call_shell",
            "status": "rejected",
            "error": {"code": "rejected", "message": "The user rejected this tool call."},
        },
        turn=T1,
        run=R,
    )
    log.end(T1)
    return log


@vector("a model request is retried after a 429; the next turn.state clears the retry")
def model_retry() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add(
        "turn.state",
        {
            "state": "running",
            "model_retry": {
                "attempt": 1,
                "retry_at": "2026-11-29T08:00:09.000Z",
                "error": {"code": "model_rate_limited", "message": "429 Too Many Requests"},
            },
        },
        turn=T1,
    )
    log.add("turn.state", {"state": "running", "model_retry": None}, turn=T1)
    log.end(T1)
    return log


@vector("a turn that ends while the model retry is pending clears it")
def model_retry_then_end() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add(
        "turn.state",
        {
            "state": "running",
            "model_retry": {
                "attempt": 3,
                "retry_at": "2026-11-29T08:00:09.000Z",
                "error": {"code": "model_unavailable", "message": "503 Service Unavailable"},
            },
        },
        turn=T1,
    )
    log.end(T1, "failed", {"code": "model_unavailable", "message": "503 Service Unavailable"})
    return log


@vector(
    "a structured result: turn.ended carries output (JSON the plugin's output schema accepted); "
    "a turn that failed output_invalid has none, and a later turn's result is its own"
)
def structured_output() -> Log:
    log = Log()
    log.session()
    log.turn(T1, "Triage ticket 42")
    log.start(T1)
    result = {
        "category": "bug",
        "severity": 2,
        "evidence": [{"kind": "ticket", "id": "T-17", "quote": "crash on save"}],
        "confidence": 0.75,
        "duplicate_of": None,
        "reply_draft": "Thanks — we can reproduce it.",
    }
    log.stream(T1, R, "msg_a1", '```json\n{"category": "bug", …}\n```')
    log.add("turn.ended", {"stop_reason": "end_turn", "error": None, "output": result}, turn=T1)
    log.turn(T2, "Triage ticket 43")
    log.start(T2)
    log.stream(T2, R, "msg_a2", "It is a bug.")
    invalid = {
        "code": "output_invalid",
        "message": "the final answer does not conform to the output schema after 2 retries: "
        "the answer is not JSON (Expecting value at line 1 column 1)",
    }
    log.end(T2, "failed", invalid)
    return log


@vector("workspace commits, then a resumed attempt restores the last one and names what was lost")
def workspace_restored() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    committed = {"execution_id": "exe_01", "files": 2, "bytes": 120}
    log.add("workspace.committed", {**committed, "manifest": "a" * 64}, turn=T1)
    log.add("workspace.committed", {**committed, "manifest": "b" * 64, "files": 3}, turn=T1)
    log.attempt(T1, 2, resumed=True)
    log.add(
        "workspace.restored",
        {
            "execution_id": "exe_01",
            "attempt": 2,
            "manifest": "b" * 64,
            "files": 3,
            "bytes": 120,
            "lost_paths": ["draft.md"],
            "lost_tool_call_ids": ["call_shell"],
        },
        turn=T1,
    )
    log.end(T1)
    return log


@vector("an MCP server did not start: the turn goes on without it and says why")
def mcp_server_unavailable() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add(
        "mcp_server.unavailable",
        {
            "server": "memory",
            "code": "mcp_unavailable",
            "message": "MCP server 'memory': Connection closed\nnpm error code EAI_AGAIN",
        },
        turn=T1,
    )
    log.end(T1)
    return log


@vector("the first attempt of a session's first turn restores nothing: no manifest yet")
def workspace_restored_empty() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.attempt(T1, 2, resumed=True)
    log.add(
        "workspace.restored",
        {"execution_id": "exe_01", "attempt": 2, "manifest": None, "files": 0, "bytes": 0},
        turn=T1,
    )
    return log


@vector("HITL: a request cancelled explicitly, then the turn is cancelled")
def hitl_cancelled() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _approval(log)
    log.add(
        "input_request.resolved",
        {
            "request_id": "req_01",
            "outcome": "cancelled",
            "answered_by": {"client_id": "cli_web", "principal_id": "prn_owner"},
        },
        turn=T1,
        client="cli_web",
        intent="int_cancel",
    )
    log.add(
        "tool_call.updated", {"tool_call_id": "call_shell", "status": "cancelled"}, turn=T1, run=R
    )
    log.end(T1, "cancelled")
    return log


@vector("grant revoked while parked: the open request expires, the turn ends revoked, and says why")
def revoked_while_parked() -> Log:
    # What the Host appends when a revocation (or an answer) meets a grant that no longer
    # holds.
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _approval(log)
    log.add(
        "input_request.resolved",
        {"request_id": "req_01", "outcome": "expired", "reason": "revoked"},
        turn=T1,
    )
    log.end(
        T1,
        "revoked",
        {"code": "grant_revoked", "message": "the execution's grant is revoked: token_revoked"},
    )
    return log


@vector("grant revoked while a tool runs: the call is cancelled, the turn ends revoked")
def revoked_while_running() -> Log:
    # What the Supervisor appends when a heartbeat finds the grant gone mid-call.
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add(
        "tool_call.started",
        {
            "tool_call_id": "call_shell",
            "name": "shell",
            "title": "Run command",
            "kind": "execute",
            "input": {"command": "sleep 60"},
        },
        turn=T1,
        run=R,
    )
    log.add(
        "tool_call.updated", {"tool_call_id": "call_shell", "status": "in_progress"}, turn=T1, run=R
    )
    log.add(
        "tool_call.updated", {"tool_call_id": "call_shell", "status": "cancelled"}, turn=T1, run=R
    )
    log.end(
        T1,
        "revoked",
        {
            "code": "grant_revoked",
            "message": "the execution's grant is revoked: principal_disabled",
        },
    )
    return log


@vector("HITL: ask_user with a response schema, answered with a payload")
def hitl_answered_payload() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.tool(T1, R, "call_ask", name="ask_user", kind="other")
    log.add(
        "input_request.opened",
        {
            "request_id": "req_01",
            "reason": "input_required",
            "tool_call_id": "call_ask",
            "prompt": "Which quarter?",
            "response_schema": {"type": "object", "properties": {"quarter": {"type": "string"}}},
            "expires_at": "2026-11-29T09:00:00Z",
        },
        turn=T1,
        run=R,
    )
    log.state(T1, "requires_action")
    log.add(
        "input_request.resolved",
        {
            "request_id": "req_01",
            "outcome": "answered",
            "payload": {"quarter": "Q3"},
            "answered_by": {"client_id": "cli_term", "principal_id": "prn_owner"},
        },
        turn=T1,
        client="cli_term",
        intent="int_answer",
    )
    log.state(T1, "running")
    log.tool_done(T1, R, "call_ask", '{"quarter":"Q3"}')
    log.end(T1)
    return log


@vector("a client (frontend) tool: offered with the turn, called, answered with its result")
def client_tool_answered() -> Log:
    log = Log()
    log.session()
    pick = {
        "name": "pick_color",
        "description": "Ask the user to pick a color",
        "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}},
    }
    # The second one as a client may send it: no description, no parameters.
    log.turn(T1, "Pick a color", client="agui", client_tools=[pick, {"name": "beep"}])
    log.start(T1)
    log.tool(T1, R, "call_pick", name="pick_color", kind="other")
    log.add(
        "input_request.opened",
        {
            "request_id": "req_01",
            "reason": "input_required",
            "tool_call_id": "call_pick",
            "prompt": "Run the client tool `pick_color`",
        },
        turn=T1,
        run=R,
    )
    log.state(T1, "requires_action")
    log.add(
        "input_request.resolved",
        {
            "request_id": "req_01",
            "outcome": "answered",
            "payload": "teal",
            "answered_by": {"client_id": "agui", "principal_id": "prn_owner"},
        },
        turn=T1,
        client="agui",
        intent="int_answer",
    )
    log.state(T1, "running")
    log.tool_done(T1, R, "call_pick", "teal")
    log.end(T1)
    return log


@vector("HITL: a request that expires ends the turn by its deadline")
def hitl_expired() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _approval(log)
    log.add("input_request.resolved", {"request_id": "req_01", "outcome": "expired"}, turn=T1)
    log.end(T1, "deadline_exceeded")
    return log


@vector("HITL answered in chat: answered_by names the chat user beside the bridge's client")
def hitl_answered_in_chat() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _approval(log)
    log.add(
        "input_request.resolved",
        {
            "request_id": "req_01",
            "outcome": "selected",
            "option_id": "allow",
            "answered_by": {
                "client_id": "cli_bridge",
                "principal_id": "prn_bridge",
                "on_behalf_of": "@alice:example.org",
            },
        },
        turn=T1,
        client="cli_bridge",
        intent="int_chat",
    )
    log.state(T1, "running")
    return log


@vector("first writer wins: a second resolution of one request is an anomaly, not a change")
def hitl_second_resolution() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _approval(log)
    for client, option in (("cli_a", "allow"), ("cli_b", "reject")):
        log.add(
            "input_request.resolved",
            {
                "request_id": "req_01",
                "outcome": "selected",
                "option_id": option,
                "answered_by": {"client_id": client, "principal_id": "prn_owner"},
            },
            turn=T1,
            client=client,
        )
    return log


@vector("a turn cancelled while waiting for input is never shown as waiting")
def cancelled_turn_with_open_request() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _approval(log)
    log.add(
        "tool_call.updated", {"tool_call_id": "call_shell", "status": "cancelled"}, turn=T1, run=R
    )
    log.end(T1, "cancelled")
    return log


def _left_open(log: Log) -> None:
    """A turn in full flight: a plan entry in progress, a call that ran, one that never
    started, a sub-agent running with a plan of its own, reasoning and a message
    streaming, and an approval waiting (what `nua show` showed after a failed turn)."""
    in_progress = {"content": "Delegate research", "status": "in_progress", "priority": "high"}
    log.add("plan.updated", {"entries": [dict(in_progress, id="p1")]}, turn=T1, run=R)
    log.tool(T1, R, "call_ran", name="shell", kind="execute")
    log.add(
        "tool_call.updated", {"tool_call_id": "call_ran", "status": "in_progress"}, turn=T1, run=R
    )
    log.tool(T1, R, "call_queued", name="read_file", kind="read")
    _worker(log)
    log.add("plan.updated", {"entries": [dict(in_progress, id="w1")]}, turn=T1, run=W)
    log.add("reasoning.delta", {"message_id": "msg_w1", "delta": "Thinking"}, turn=T1, run=W)
    log.add("message.started", {"message_id": "msg_w1", "role": "assistant"}, turn=T1, run=W)
    log.add("message.delta", {"message_id": "msg_w1", "delta": "The num"}, turn=T1, run=W)
    _approval(log, request="req_w1", call="call_w1")


def _ended_with_items_open(reason: str, error: dict[str, str] | None = None) -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _left_open(log)
    log.end(T1, reason, error)
    return log


for _reason, _error, _why in (
    ("end_turn", None, "completed"),
    ("failed", {"code": "internal_error", "message": "boom"}, "failed"),
    ("cancelled", None, "cancelled"),
    ("revoked", {"code": "grant_revoked", "message": "revoked: token_revoked"}, "revoked"),
    ("deadline_exceeded", None, "past its deadline"),
):

    def _build(reason: str = _reason, error: dict[str, str] | None = _error) -> Log:
        return _ended_with_items_open(reason, error)

    _build.__name__ = f"settled_when_{_reason}"
    vector(
        f"a turn that ended {_why} is settled: a pending call is cancelled, a running one "
        "unknown, the sub-agent cancelled, in-progress plan entries pending again, streams "
        "interrupted and the open request cancelled"
    )(_build)


@vector("an ended turn stays settled: items that would be open again are anomalies")
def settled_stays_settled() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.tool(T1, R, "call_ran", name="shell", kind="execute")
    log.end(T1, "failed", {"code": "internal_error", "message": "boom"})
    # Late arrivals: none may reopen anything; a terminal update still lands.
    log.add(
        "tool_call.updated", {"tool_call_id": "call_ran", "status": "in_progress"}, turn=T1, run=R
    )
    log.tool(T1, R, "call_late")
    log.add("message.started", {"message_id": "msg_late", "role": "assistant"}, turn=T1, run=R)
    log.add("reasoning.delta", {"message_id": "msg_late", "delta": "Hm"}, turn=T1, run=R)
    _worker(log)
    entries = [{"id": "p1", "content": "Late", "status": "in_progress", "priority": "low"}]
    log.add("plan.updated", {"entries": entries}, turn=T1, run=R)
    log.add(
        "tool_call.updated",
        {"tool_call_id": "call_ran", "status": "failed", "error": {"code": "x", "message": "y"}},
        turn=T1,
        run=R,
    )
    log.add("plan.updated", {"entries": [dict(entries[0], status="completed")]}, turn=T1, run=R)
    return log


@vector("plan.updated replaces the run's whole TODO list each time")
def plan_updates() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    entries = [
        {"id": "p1", "content": "Read notes", "status": "in_progress", "priority": "high"},
        {"id": "p2", "content": "Write report", "status": "pending", "priority": "medium"},
    ]
    log.add("plan.updated", {"entries": entries}, turn=T1, run=R)
    entries = [
        dict(entries[0], status="completed"),
        dict(entries[1], status="in_progress"),
        {"id": "p3", "content": "Publish", "status": "pending", "priority": "low"},
    ]
    log.add("plan.updated", {"entries": entries}, turn=T1, run=R)
    log.end(T1)
    return log


def _worker(log: Log, worker: str = W, parent_run: str = R, call: str = "call_task") -> None:
    log.tool(log_turn := T1, parent_run, call, name="task", kind="other")
    log.add(
        "worker.started",
        {
            "worker_run_id": worker,
            "parent_run_id": parent_run,
            "parent_tool_call_id": call,
            "name": "researcher",
            "task": "Collect the numbers",
        },
        turn=log_turn,
        run=parent_run,
    )


@vector("a sub-agent (worker) with its own messages, tool calls and plan under its tool call")
def worker_nested() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add(
        "plan.updated",
        {
            "entries": [
                {
                    "id": "p1",
                    "content": "Delegate research",
                    "status": "in_progress",
                    "priority": "high",
                }
            ]
        },
        turn=T1,
        run=R,
    )
    _worker(log)
    log.add(
        "plan.updated",
        {
            "entries": [
                {
                    "id": "w1",
                    "content": "Grep the data",
                    "status": "in_progress",
                    "priority": "medium",
                }
            ]
        },
        turn=T1,
        run=W,
    )
    log.tool(T1, W, "call_w1", name="shell", kind="execute")
    log.tool_done(T1, W, "call_w1", "42")
    log.stream(T1, W, "msg_w1", "The number is 42.")
    log.add(
        "worker.ended", {"worker_run_id": W, "status": "completed", "summary": "42"}, turn=T1, run=R
    )
    log.tool_done(T1, R, "call_task", "42")
    log.stream(T1, R, "msg_a1", "Research says 42.")
    log.end(T1)
    return log


@vector("a worker started by a worker: cards nest, usage rolls up through both")
def worker_in_worker() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    _worker(log)
    _worker(log, worker=W2, parent_run=W, call="call_task2")
    log.usage(T1, W2, model="small", n=1)
    log.usage(T1, W, model="small", n=2)
    log.usage(T1, R, model="big", n=3)
    log.add(
        "worker.ended", {"worker_run_id": W2, "status": "failed", "summary": None}, turn=T1, run=W
    )
    log.add(
        "worker.ended", {"worker_run_id": W, "status": "completed", "summary": "ok"}, turn=T1, run=R
    )
    log.end(T1)
    return log


@vector("usage across two models and a worker: per turn, per model, per worker, per session")
def usage_two_models_and_worker() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.usage(T1, R, provider="openai", model="gpt-5", n=1)
    _worker(log)
    log.usage(T1, W, provider="anthropic", model="claude-sonnet-4-5", n=2)
    log.usage(T1, R, provider="openai", model="gpt-5", n=3)
    log.end(T1)
    log.turn(T2, "Again")
    log.start(T2)
    log.usage(T2, R, provider="anthropic", model="claude-sonnet-4-5", n=1)
    log.end(T2)
    return log


@vector("timeline order is first appearance: answer, tool results and a worker card interleave")
def timeline_interleave() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add("message.started", {"message_id": "msg_a1", "role": "assistant"}, turn=T1, run=R)
    log.add("message.delta", {"message_id": "msg_a1", "delta": "Working"}, turn=T1, run=R)
    log.tool(T1, R, "call_01")
    _worker(log)
    log.tool_done(T1, R, "call_01")
    log.add("message.delta", {"message_id": "msg_a1", "delta": " on it"}, turn=T1, run=R)
    log.tool(T1, W, "call_w1")
    log.add("message.started", {"message_id": "msg_a2", "role": "assistant"}, turn=T1, run=R)
    log.tool_done(T1, W, "call_w1")
    log.add(
        "message.completed",
        {"message_id": "msg_a1", "text": "Working on it", "status": "complete"},
        turn=T1,
        run=R,
    )
    log.add("worker.ended", {"worker_run_id": W, "status": "completed"}, turn=T1, run=R)
    log.tool_done(T1, R, "call_task")
    log.add("message.delta", {"message_id": "msg_a2", "delta": "Final answer."}, turn=T1, run=R)
    log.add(
        "message.completed",
        {"message_id": "msg_a2", "text": "Final answer.", "status": "complete"},
        turn=T1,
        run=R,
    )
    log.end(T1)
    return log


@vector("artifacts: one published by a tool in a turn, one at session level")
def artifact_published() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.tool(T1, R, "call_pub", name="publish_artifact", kind="other")
    log.add(
        "artifact.published",
        {
            "artifact_id": "art_01",
            "name": "report.md",
            "media_type": "text/markdown",
            "size": 1234,
            "sha256": "0" * 63 + "1",
            "tool_call_id": "call_pub",
        },
        turn=T1,
        run=R,
    )
    log.tool_done(T1, R, "call_pub")
    log.end(T1)
    log.add(
        "artifact.published",
        {
            "artifact_id": "art_02",
            "name": "export.csv",
            "media_type": "text/csv",
            "size": 10,
            "sha256": "f" * 64,
        },
    )
    return log


@vector("an artifact whose upload failed in a completed turn, retried: failed, pending, published")
def artifact_failed_then_retried() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.tool(T1, R, "call_pub", name="publish_artifact", kind="other")
    log.add(
        "artifact.published",
        {
            "artifact_id": "art_01",
            "name": "report.md",
            "media_type": "text/markdown",
            "size": 12,
            "sha256": "a" * 64,
            "tool_call_id": "call_pub",
            "state": "failed",
            "error": {"code": "blobs_unavailable", "message": "the blob store does not answer"},
        },
        turn=T1,
        run=R,
    )
    log.tool_done(T1, R, "call_pub")
    log.end(T1)
    log.add("artifact.updated", {"artifact_id": "art_01", "state": "pending"}, turn=T1)
    log.add("artifact.updated", {"artifact_id": "art_01", "state": "published"}, turn=T1)
    log.add("artifact.updated", {"artifact_id": "art_99", "state": "published"})
    return log


@vector(
    "file changes appear in the timeline, keyed by the reporting action's id; a text change "
    "with its diff inline or by reference, a binary one with size and sha256"
)
def file_changed() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.tool(T1, R, "call_w", name="write_file", kind="edit")
    log.add(
        "file.changed",
        {"path": "notes.md", "change": "created", "tool_call_id": "call_w"},
        turn=T1,
        run=R,
    )
    log.add(
        "file.changed",
        {
            "path": "old.md",
            "change": "deleted",
            "tool_call_id": "call_w",
            "diff_ref": "blob:sha256:" + "cd" * 32,
        },
        turn=T1,
        run=R,
    )
    log.add(
        "file.changed",
        {
            "path": "notes.md",
            "change": "modified",
            "tool_call_id": "call_w",
            "diff": "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-one\n+two\n",
            "size": 4,
            "sha256": "ab" * 32,
        },
        turn=T1,
        run=R,
    )
    log.add(
        "file.changed",
        {
            "path": "big.txt",
            "change": "created",
            "tool_call_id": "call_w",
            "diff_ref": "sha256:" + "ef" * 32,
            "size": 90000,
            "sha256": "01" * 32,
        },
        turn=T1,
        run=R,
    )
    log.add(
        "file.changed",
        {
            "path": "logo.png",
            "change": "modified",
            "tool_call_id": "call_w",
            "size": 2048,
            "sha256": "02" * 32,
            "binary": True,
        },
        turn=T1,
        run=R,
    )
    log.tool_done(T1, R, "call_w")
    log.end(T1)
    return log


@vector("delivery.updated tracks an external delivery separately from the turn")
def delivery_updated() -> Log:
    log = Log()
    log.session()
    log.add(
        "delivery.updated",
        {
            "delivery_id": "dlv_01",
            "channel": "slack",
            "target": "#ops",
            "status": "accepted",
            "attempts": 0,
        },
    )
    log.add(
        "delivery.updated",
        {
            "delivery_id": "dlv_01",
            "channel": "slack",
            "target": "#ops",
            "status": "failed",
            "attempts": 1,
            "error": {"code": "timeout", "message": "no answer"},
        },
    )
    log.add(
        "delivery.updated",
        {
            "delivery_id": "dlv_01",
            "channel": "slack",
            "target": "#ops",
            "status": "delivered",
            "attempts": 2,
        },
    )
    return log


@vector("a chat delivery goes pending, retrying with backoff, then sent; history keeps each try")
def delivery_retried() -> Log:
    log = Log()
    log.session()
    base = {"delivery_id": "dlv_card", "channel": "matrix", "target": "!room:hs", "kind": "edit"}
    log.add("delivery.updated", {**base, "status": "pending"})
    log.add(
        "delivery.updated",
        {
            **base,
            "status": "retrying",
            "attempts": 1,
            "next_attempt_at": "2026-11-29T08:00:02.000Z",
            "error": {"code": "unreachable", "message": "connection refused"},
        },
    )
    log.add(
        "delivery.updated",
        {
            **base,
            "status": "retrying",
            "attempts": 2,
            "next_attempt_at": "2026-11-29T08:00:06.000Z",
            "error": {"code": "http_502", "message": "bad gateway"},
        },
    )
    log.add("delivery.updated", {**base, "status": "sent", "attempts": 3, "event_id": "$ev1"})
    # A late report without the event id keeps the one known.
    log.add("delivery.updated", {**base, "status": "sent", "attempts": 3})
    return log


@vector("duplicates delivered after a reconnect change nothing")
def duplicates() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add("message.started", {"message_id": "msg_a1", "role": "assistant"}, turn=T1, run=R)
    log.add("message.delta", {"message_id": "msg_a1", "delta": "one "}, turn=T1, run=R)
    log.repeat(4)
    log.repeat(3)
    log.add("message.delta", {"message_id": "msg_a1", "delta": "two"}, turn=T1, run=R)
    log.repeat(0)
    log.repeat(6)
    return log


@vector("a gap in seq stops the reducer with the expected seq; the state is the one before")
def gap() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.add("turn.state", {"state": "running"}, turn=T1, seq=5)
    return log


@vector("an unknown action type advances seq and changes nothing else")
def unknown_type() -> Log:
    log = Log()
    log.session()
    log.add("telemetry.sampled", {"rate": 0.5, "nested": {"x": [1, 2]}})
    log.turn(T1)
    log.add("turn.annotated", {"note": "from a newer host"}, turn=T1)
    return log


@vector("a stream cut by a crash is closed as interrupted; the resumed attempt re-issues")
def interrupted_stream() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add("message.started", {"message_id": "msg_a1", "role": "assistant"}, turn=T1, run=R)
    log.add("message.delta", {"message_id": "msg_a1", "delta": "The answer is"}, turn=T1, run=R)
    log.attempt(T1, 2, resumed=True)
    log.add(
        "message.completed",
        {"message_id": "msg_a1", "text": "The answer is", "status": "interrupted"},
        turn=T1,
        run=R,
    )
    log.stream(T1, R, "msg_a1_2", "The answer is 42.")
    log.end(T1)
    return log


@vector("a retried turn is a new turn with a retry trigger and retry_of")
def retried_turn() -> Log:
    log = Log()
    log.session()
    log.turn(T1, "Summarise")
    log.start(T1)
    log.end(T1, "failed", {"code": "model_error", "message": "upstream 500"})
    log.turn(T2, "Summarise", kind="retry", retry_of=T1)
    log.start(T2)
    log.stream(T2, R, "msg_a2", "Summary.")
    log.end(T2)
    return log


@vector("enqueued turns: the second waits queued while the first runs")
def enqueued_turns() -> Log:
    log = Log()
    log.session()
    log.turn(T1, "First")
    log.start(T1)
    log.turn(T2, "Second")
    log.end(T1)
    log.start(T2)
    log.end(T2)
    return log


@vector("the interrupt policy: the running turn is cancelled, then the new one starts")
def interrupt_turn() -> Log:
    log = Log()
    log.session()
    log.turn(T1, "Long job")
    log.start(T1)
    log.add("message.started", {"message_id": "msg_a1", "role": "assistant"}, turn=T1, run=R)
    log.add("message.delta", {"message_id": "msg_a1", "delta": "Work"}, turn=T1, run=R)
    log.add(
        "message.completed",
        {"message_id": "msg_a1", "text": "Work", "status": "interrupted"},
        turn=T1,
        run=R,
    )
    log.end(T1, "cancelled")
    log.turn(T2, "Do this instead")
    log.start(T2)
    log.end(T2)
    return log


@vector("attempt markers: each claim adds an attempt; resumed ones say so")
def attempts() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.attempt(T1, 2, resumed=True)
    log.attempt(T1, 3, resumed=True)
    log.end(T1)
    return log


@vector("actions naming unknown entities are recorded as anomalies and change nothing else")
def anomalies_unknown_entities() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add("message.delta", {"message_id": "msg_nope", "delta": "x"}, turn=T1, run=R)
    log.add("tool_call.updated", {"tool_call_id": "call_nope", "status": "completed"}, turn=T1)
    log.add("turn.state", {"state": "running"}, turn="trn_nope")
    log.add("usage.recorded", {"provider": "p", "model": "m", "input_tokens": 5})
    log.add("worker.ended", {"worker_run_id": "run_nope", "status": "completed"}, turn=T1)
    log.add("input_request.resolved", {"request_id": "req_nope", "outcome": "expired"}, turn=T1)
    log.add(
        "message.completed", {"message_id": "msg_nope", "text": "", "status": "complete"}, turn=T1
    )
    log.add(
        "artifact.published",
        {
            "artifact_id": "art_x",
            "name": "x",
            "media_type": "text/plain",
            "size": 1,
            "sha256": "a" * 64,
        },
        turn="trn_nope",
    )
    return log


@vector("conflicting facts are anomalies: repeated creation, ended twice, delta after completion")
def anomalies_conflicts() -> Log:
    log = Log()
    log.session()
    log.session("Again")
    log.turn(T1)
    log.turn(T1)
    log.start(T1)
    log.stream(T1, R, "msg_a1", "Done")
    log.add("message.delta", {"message_id": "msg_a1", "delta": "late"}, turn=T1, run=R)
    log.tool(T1, R, "call_01")
    log.tool(T1, R, "call_01")
    log.end(T1)
    log.end(T1, "failed")
    log.state(T1, "running")
    log.add(
        "input_request.opened",
        {"request_id": "req_late", "reason": "input_required", "prompt": "late?"},
        turn=T1,
        run=R,
    )
    return log


@vector("an action of another session is an anomaly")
def anomaly_wrong_session() -> Log:
    log = Log()
    log.session()
    log.add("session.updated", {"title": "Hijack"}, session_id="ses_01JOTHER00000000000000000")
    log.add("session.updated", {"title": "Fine"})
    log.add("telemetry.sampled", {"rate": 1}, session_id="ses_01JOTHER00000000000000000")
    assert log.session_id == SESSION
    return log


@vector("floats in free-form values are written as JavaScript writes numbers")
def free_form_floats() -> Log:
    log = Log()
    log.add("session.created", {"title": "floats", "metadata": {"ratio": 0.25, "whole": 3.0}})
    log.turn(T1)
    log.start(T1)
    log.add(
        "tool_call.started",
        {
            "tool_call_id": "call_01",
            "name": "sample",
            "title": "Sample",
            "kind": "other",
            "input": {
                "temperature": 0.7,
                "n": 1.0,
                "tiny": 1e-05,
                "tinier": 1.5e-07,
                "big": 1e16,
                "huge": 1e21,
                "neg": -2.5,
                "list": [0.1, 2.0, 3],
            },
        },
        turn=T1,
        run=R,
    )
    log.add(
        "input_request.opened",
        {
            "request_id": "req_01",
            "reason": "input_required",
            "tool_call_id": "call_01",
            "prompt": "Score?",
            "response_schema": {"type": "number", "minimum": 0.5},
        },
        turn=T1,
        run=R,
    )
    log.add(
        "input_request.resolved",
        {
            "request_id": "req_01",
            "outcome": "answered",
            "payload": {"score": 2.5, "exact": 10.0},
            "answered_by": {"client_id": "cli_a", "principal_id": "prn_owner"},
        },
        turn=T1,
    )
    log.end(T1)
    return log


@vector("content parts of an unknown type are kept as they came (forward compatibility)")
def unknown_content_part() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    log.add(
        "message.added",
        {
            "message_id": "msg_a1",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Here: "},
                {
                    "type": "image",
                    "uri": "blob:sha256:" + "ab" * 32,
                    "alt": "chart",
                    "size": {"w": 640, "h": 480},
                },
            ],
        },
        turn=T1,
        run=R,
    )
    log.end(T1)
    return log


@vector("a corrupt log with a worker cycle counts usage once per worker and terminates")
def worker_cycle() -> Log:
    log = Log()
    log.session()
    log.turn(T1)
    log.start(T1)
    for worker, parent in (("run_self", "run_self"), ("run_a", "run_b"), ("run_b", "run_a")):
        log.add(
            "worker.started",
            {
                "worker_run_id": worker,
                "parent_run_id": parent,
                "parent_tool_call_id": "call_x",
                "name": "w",
                "task": "t",
            },
            turn=T1,
            run=parent,
        )
    log.usage(T1, "run_self")
    log.usage(T1, "run_a", n=2)
    log.end(T1)
    return log


@vector("text is kept exactly: non-ASCII, emoji, quotes, control characters, line separators")
def unicode_text() -> Log:
    log = Log()
    log.session("Résumé — 報告 📄")
    log.turn(T1, 'Quote "this" \\ and tab\there')
    log.start(T1)
    log.stream(T1, R, "msg_a1", "Ünïcödé ", "😀\n", "bell\u0007 ", "sep\u2028end", " nul?\u0001")
    log.end(T1)
    return log


@vector("the whole demo shape: plan, approval, a worker with a tool and plan, artifact, answer")
def demo_shape() -> Log:
    log = Log()
    log.session("Demo")
    log.turn(T1, "Write the quarterly report")
    log.start(T1)
    log.add("reasoning.completed", {"message_id": "msg_r1", "text": "Plan first."}, turn=T1, run=R)
    log.add(
        "plan.updated",
        {
            "entries": [
                {"id": "p1", "content": "Draft notes", "status": "in_progress", "priority": "high"},
                {"id": "p2", "content": "Research", "status": "pending", "priority": "medium"},
            ]
        },
        turn=T1,
        run=R,
    )
    log.usage(T1, R, n=1)
    log.tool(T1, R, "call_write", name="write_file", kind="edit")
    log.add(
        "file.changed",
        {"path": "notes.md", "change": "created", "tool_call_id": "call_write"},
        turn=T1,
        run=R,
    )
    log.tool_done(T1, R, "call_write")
    _approval(log)
    log.add(
        "input_request.resolved",
        {
            "request_id": "req_01",
            "outcome": "selected",
            "option_id": "allow",
            "answered_by": {"client_id": "cli_a", "principal_id": "prn_owner"},
        },
        turn=T1,
        client="cli_a",
    )
    log.state(T1, "running")
    log.tool_done(T1, R, "call_shell", "notes.md")
    log.usage(T1, R, n=1)
    _worker(log)
    log.add(
        "plan.updated",
        {
            "entries": [
                {"id": "w1", "content": "Count words", "status": "completed", "priority": "medium"}
            ]
        },
        turn=T1,
        run=W,
    )
    log.tool(T1, W, "call_w1", name="read_file", kind="read")
    log.tool_done(T1, W, "call_w1", "12 words")
    log.usage(T1, W, n=1)
    log.add(
        "worker.ended",
        {"worker_run_id": W, "status": "completed", "summary": "12 words"},
        turn=T1,
        run=R,
    )
    log.tool_done(T1, R, "call_task", "12 words")
    log.tool(T1, R, "call_pub", name="publish_artifact", kind="other")
    log.add(
        "artifact.published",
        {
            "artifact_id": "art_01",
            "name": "report.md",
            "media_type": "text/markdown",
            "size": 42,
            "sha256": "e" * 64,
            "tool_call_id": "call_pub",
        },
        turn=T1,
        run=R,
    )
    log.tool_done(T1, R, "call_pub")
    log.stream(T1, R, "msg_a1", "The report ", "is ready.")
    log.usage(T1, R, n=1)
    log.end(T1)
    return log
