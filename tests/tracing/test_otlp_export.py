"""Traces of a real `nua serve`, received by a real OTLP/HTTP receiver and decoded with
opentelemetry-proto: one trace per turn with the GenAI span tree, usage that sums to the
turn's `usage.recorded`, one trace across a kill -9 and a resume, content only when asked."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from opennua.runtime._tracing import USAGE_ATTRIBUTES
from tests._support.polling import wait_for
from tests.e2e._proc import Server
from tests.tracing._otlp import Receiver, Span

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
PROMPT = "write the quarterly report on durable sessions"


def _state(client: httpx.Client, sid: str) -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"/v1/sessions/{sid}").json()["state"]
    return body


def _start(client: httpx.Client, headers: dict[str, str] | None = None) -> str:
    sid: str = client.post("/v1/sessions", json={"client_id": "cli_otel"}).json()["session_id"]
    sent = client.post(
        f"/v1/sessions/{sid}/messages",
        json={"client_id": "cli_otel", "content": [{"type": "text", "text": PROMPT}]},
        headers=headers or {},
    )
    assert sent.status_code == 202, sent.text
    return sid


def _approve(client: httpx.Client, sid: str) -> None:
    opened = wait_for(lambda: _state(client, sid)["open_input_requests"])
    answered = client.post(
        f"/v1/sessions/{sid}/input-requests/{opened[0]['request_id']}/answer",
        json={"client_id": "cli_otel", "option_id": "allow_once"},
    )
    assert answered.status_code == 200, answered.text


def _ended(client: httpx.Client, sid: str) -> dict[str, Any]:
    turn: dict[str, Any] = wait_for(
        lambda: (t := _state(client, sid)["turns"][0])["state"] == "ended" and t, timeout=90
    )
    assert turn["stop_reason"] == "end_turn", turn["error"]
    return turn


def _turn_spans(receiver: Receiver) -> list[Span]:
    """Every span, once the turn span (emitted when the turn ends) has arrived."""
    wait_for(lambda: any(s.name == "turn" for s in receiver.snapshot()), timeout=30)
    return receiver.snapshot()


def _children(spans: list[Span], parent: Span) -> list[Span]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


def test_the_demo_turn_is_one_trace_with_the_genai_tree_and_its_usage(tmp_path: Path) -> None:
    with Receiver() as receiver:
        server = Server(tmp_path, step_delay="0", env=receiver.env()).start()
        try:
            with server.client() as client:
                traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
                sid = _start(client, {"traceparent": traceparent})
                _approve(client, sid)
                turn = _ended(client, sid)
                spans = _turn_spans(receiver)
                metrics = client.get("/metrics").text
                actions = client.get(f"/v1/sessions/{sid}/actions", params={"limit": 1000}).json()
                actions = actions["actions"] if isinstance(actions, dict) else actions
        finally:
            server.stop()

    # The request that sent the message joined the trace: the turn is its child.
    assert turn["trace_id"] == CALLER_TRACE
    assert {s.trace_id for s in spans} == {CALLER_TRACE}
    (root,) = [s for s in spans if s.name == "turn"]
    assert root.parent_span_id == CALLER_SPAN
    assert root.attributes["opennua.session_id"] == sid
    assert root.attributes["opennua.turn_id"] == turn["turn_id"]
    assert root.attributes["opennua.client_id"] == "cli_otel"

    # Two attempts (one before the approval, one after), each an invoke_agent of the root.
    agents = _children(spans, root)
    assert {s.name for s in agents} == {"invoke_agent default"}
    assert sorted(s.attributes["opennua.attempt"] for s in agents) == [1, 2]
    assert agents[0].attributes["gen_ai.operation.name"] == "invoke_agent"
    under_agents = [c for a in agents for c in _children(spans, a)]
    names = Counter(c.name.split(" ")[0] for c in under_agents)
    assert names["chat"] >= 5 and names["execute_tool"] >= 5, names
    # The sub-agent's invoke_agent is the child of its parent's execute_tool task.
    (task,) = [c for c in under_agents if c.name == "execute_tool task"]
    (worker,) = _children(spans, task)
    assert worker.name == "invoke_agent researcher"
    assert worker.attributes["opennua.parent_run_id"] == task.attributes["opennua.run_id"]
    worker_kinds = {c.name.split(" ")[0] for c in _children(spans, worker)}
    assert worker_kinds == {"chat", "execute_tool"}

    # Every span carries the chain; runs name the action seqs they produced.
    for span in spans:
        assert span.attributes["opennua.session_id"] == sid, span.name
        assert span.attributes["opennua.turn_id"] == turn["turn_id"], span.name
        assert span.attributes["opennua.client_id"] == "cli_otel", span.name
    seqs = [
        seq
        for s in spans
        if s.name.startswith("invoke_agent")
        for seq in s.attributes["opennua.action_seqs"]
    ]
    assert seqs and len(seqs) == len(set(seqs))
    # Each chat and tool span names the seqs of its own actions (its message, its call).
    history = {a["seq"]: a for a in actions}
    for span in spans:
        kind = span.name.split(" ")[0]
        if kind not in ("chat", "execute_tool"):
            continue
        own = span.attributes["opennua.action_seqs"]
        assert own and set(own) <= set(seqs), span.name
        if kind == "chat":
            ids = {history[q]["data"].get("message_id") for q in own} - {None}
            assert ids == {span.attributes["opennua.message_id"]}, span.name
        else:
            ids = {history[q]["data"].get("tool_call_id") for q in own} - {None}
            assert ids == {span.attributes["gen_ai.tool.call.id"]}, span.name

    # The chat spans' usage sums to the turn's usage.recorded totals.
    chats = [s for s in spans if s.name.startswith("chat")]
    assert all(c.attributes["gen_ai.provider.name"] for c in chats)
    for field, attribute in USAGE_ATTRIBUTES.items():
        assert sum(c.attributes.get(attribute, 0) for c in chats) == turn["usage"][field], field
    assert turn["usage"]["input_tokens"] > 0

    # Content is off by default: the prompt is in no span.
    assert not any(PROMPT in str(v) for s in spans for v in s.attributes.values())

    # The GenAI histograms reach /metrics (and OTLP) next to opennua's own counters.
    assert "gen_ai_client_token_usage" in metrics
    assert "gen_ai_client_operation_duration" in metrics
    tokens: dict[str, float] = {}
    durations = 0.0
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "gen_ai_client_token_usage_sum":
                kind = sample.labels["gen_ai_token_type"]
                tokens[kind] = tokens.get(kind, 0) + sample.value
            elif sample.name == "gen_ai_client_operation_duration_seconds_count":
                durations += sample.value
    assert tokens == {
        "input": turn["usage"]["input_tokens"],
        "output": turn["usage"]["output_tokens"],
    }
    assert durations == len(chats)
    assert "nua_actions_appended" in metrics
    wait_for(lambda: "gen_ai.client.token.usage" in receiver.metric_names, timeout=15)


def test_content_is_recorded_only_when_enabled(tmp_path: Path) -> None:
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    with Receiver() as receiver:
        server = Server(tmp_path, step_delay="0", env=receiver.env() | env).start()
        try:
            with server.client() as client:
                sid = _start(client)
                _approve(client, sid)
                turn = _ended(client, sid)
                spans = _turn_spans(receiver)
        finally:
            server.stop()
    # No traceparent: the trace id is the turn's own.
    assert {s.trace_id for s in spans} == {turn["trace_id"]}
    chats = [s for s in spans if s.name.startswith("chat")]
    assert any(PROMPT in str(c.attributes.get("gen_ai.input.messages")) for c in chats)
    tools = [s for s in spans if s.name == "execute_tool write_file"]
    assert tools and "notes.md" in tools[0].attributes["gen_ai.tool.call.arguments"]


def _nua_trace(data: Path, sid: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("NUA_URL", "NUA_TOKEN")}
    result = subprocess.run(
        [sys.executable, "-m", "opennua.cli", "trace", sid],
        env=env | {"NUA_DATA": str(data), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_a_turn_resumed_after_kill9_on_another_supervisor_stays_one_trace(
    tmp_path: Path,
) -> None:
    with Receiver() as receiver:
        env = receiver.env()
        server = Server(tmp_path, step_delay="0.3", env=env).start()
        try:
            with server.client() as client:
                sid = _start(client)
                _approve(client, sid)
                seq = _state(client, sid)["seq"]
                # Let the resumed attempt work (and export some spans), then kill it mid-run.
                wait_for(lambda: _state(client, sid)["seq"] > seq + 8, timeout=30)
                wait_for(
                    lambda: any(
                        s.attributes.get("opennua.attempt") == 2 for s in receiver.snapshot()
                    ),
                    timeout=30,
                )
            server.kill9()
            server = Server(tmp_path, step_delay="0", env=env).start()  # a new supervisor
            with server.client() as client:
                turn = _ended(client, sid)
                spans = _turn_spans(receiver)
                printed = _nua_trace(tmp_path, sid)
        finally:
            server.stop()
    assert {s.trace_id for s in spans} == {turn["trace_id"]}
    # `nua trace` prints the id a person looks the turn up by in their backend.
    assert f"trace {turn['trace_id']}" in printed
    attempts = {s.attributes.get("opennua.attempt") for s in spans} - {None}
    assert attempts == {1, 2, 3}
    supervisors = {s.attributes.get("opennua.supervisor_id") for s in spans} - {None}
    assert len(supervisors) == 2
    (root,) = [s for s in spans if s.name == "turn"]
    assert root.attributes["opennua.attempts"] == 3
    resumed = [
        s
        for s in spans
        if s.name == "invoke_agent default" and s.attributes["opennua.attempt"] == 3
    ]
    assert [s.parent_span_id for s in resumed] == [root.span_id]


@pytest.mark.postgres
def test_scale_out_a_supervisor_killed_mid_turn_and_another_finishing_make_one_trace(
    tmp_path: Path, pg_url: str
) -> None:
    with Receiver() as receiver:
        env = receiver.env()
        host = Server(tmp_path, db=pg_url, role="host", env=env).start()
        first = Server(tmp_path, db=pg_url, role="supervisor", step_delay="0.3", env=env)
        second = Server(tmp_path, db=pg_url, role="supervisor", step_delay="0", env=env)
        try:
            first.start()
            with host.client() as client:
                traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
                sid = _start(client, {"traceparent": traceparent})
                _approve(client, sid)
                seq = _state(client, sid)["seq"]
                wait_for(lambda: _state(client, sid)["seq"] > seq + 8, timeout=30)
                first.kill9()
                second.start()
                turn = _ended(client, sid)
                spans = _turn_spans(receiver)
        finally:
            for server in (second, first, host):
                server.stop()
    # The Host (its own process) fixed the trace; both supervisors continued it.
    assert {s.trace_id for s in spans} == {turn["trace_id"]} == {CALLER_TRACE}
    supervisors = {s.attributes.get("opennua.supervisor_id") for s in spans} - {None}
    assert len(supervisors) == 2
    (root,) = [s for s in spans if s.name == "turn"]
    assert root.parent_span_id == CALLER_SPAN
    finished = [
        s
        for s in spans
        if s.name == "invoke_agent default" and s.attributes["opennua.attempt"] == 3
    ]
    assert [s.parent_span_id for s in finished] == [root.span_id]
